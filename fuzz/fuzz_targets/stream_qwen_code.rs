#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sanddune_fuzz_targets::stream_qwen_code(data));
