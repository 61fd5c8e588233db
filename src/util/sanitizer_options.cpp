// Default options of AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer for
// the executables of a -DLOL_SANITIZE=ON build (CMakeLists.txt links this file into each
// of them; never into a normal build). The sanitizer runtimes call these hooks at start-up;
// the ASAN_OPTIONS / UBSAN_OPTIONS / LSAN_OPTIONS environment variables still override
// them. Set here rather than in each test's environment so that the `lol` processes the
// tests start get them too. docs/robustness.md "Sanitizers".

extern "C" {

// Stack use after return, initialization-order bugs across translation units, and
// string functions reading past a terminator are off by default; leaks are on.
const char* __asan_default_options() {
  return "detect_leaks=1:check_initialization_order=1:strict_init_order=1:"
         "detect_stack_use_after_return=1:strict_string_checks=1";
}

// The build uses -fno-sanitize-recover=undefined: the first report aborts the process.
const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

}  // extern "C"
