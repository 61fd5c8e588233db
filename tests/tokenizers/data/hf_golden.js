// Golden ids from Hugging Face `tokenizers` (the Rust library, through its Node
// binding: `npm install tokenizers`) for tests/tokenizers/test_sentencepiece_bpe.cpp.
//   node hf_golden.js TOKENIZER.json TEXTS.jsonl [--added] > GOLDEN.jsonl
// With --added the first line is {"vocab_size" (with added tokens), "added_ids":
// [the id of each added_tokens entry's content, in file order]}.
// TEXTS.jsonl: one {"text": ...} per line. Output, one line per text:
//   {"text", "ids" (add_special_tokens false), "ids_special" (true),
//    "decoded" (decode(ids, skip_special_tokens=false)), "decoded_skip" (true, of ids_special)}
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
(async () => {
  const tok = Tokenizer.fromFile(process.argv[2]);
  const lines = fs.readFileSync(process.argv[3], 'utf8').split('\n').filter((l) => l.length > 0);
  if (process.argv[4] === '--added') {
    const added = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')).added_tokens || [];
    const added_ids = added.map((t) => tok.tokenToId(t.content));
    process.stdout.write(JSON.stringify({ vocab_size: tok.getVocabSize(true), added_ids }) + '\n');
  }
  for (const line of lines) {
    const text = JSON.parse(line).text;
    const ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
    const ids_special = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
    const decoded = await tok.decode(ids, false);
    const decoded_skip = await tok.decode(ids_special, true);
    process.stdout.write(JSON.stringify({ text, ids, ids_special, decoded, decoded_skip }) + '\n');
  }
})();
