# Sourced by scripts/test.sh and scripts/sanitize.sh before they build or run sanitized
# code: `lsan_probe COMPILER` checks whether LeakSanitizer can run here. Some containers
# deny the ptrace-like access it needs; there it aborts every process at exit
# ("LeakSanitizer has encountered a fatal error"). Then leak checks are turned off
# (ASAN_OPTIONS detect_leaks=0, exported; ASan and UBSan still apply) with a warning.
# Sets LSAN_STATE to ON or OFF.
lsan_probe() {
  local cxx=$1 dir
  LSAN_STATE=ON
  dir=$(mktemp -d)
  echo 'int main() { return 0; }' >"$dir/p.cpp"
  if "$cxx" -fsanitize=address "$dir/p.cpp" -o "$dir/p" 2>/dev/null &&
     ! "$dir/p" >/dev/null 2>"$dir/err" && grep -q "LeakSanitizer" "$dir/err"; then
    echo "warning: LeakSanitizer cannot run here (ptrace denied?); leak checks are off" >&2
    LSAN_STATE=OFF
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  fi
  rm -rf "$dir"
}
