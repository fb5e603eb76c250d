//! The text features of the argument rules' sketches (`fingerprint.rs`): the whole-text reader
//! (`feed_text`, what `sketch_text` and the binding layer use for a text read at once) against
//! the streaming one (`TextFeatures`, what a streamed answer is read with), on arbitrary bytes
//! cut into arbitrary pieces.
//!
//! Properties:
//! - the same sketch (same kept hashes, same completeness) however the text is cut;
//! - for UTF-8 text, its code points read by `feed_code_points` give that sketch too.
#![no_main]

use arbitrary::Arbitrary;
use doomloop_engine::fingerprint::{sketch_text, Sketch, TextFeatures};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    context: u64,
    /// Where the text is cut, as lengths of the pieces (a zero length is an empty piece).
    cuts: Vec<u8>,
    text: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let whole = sketch_text(input.context, &input.text);

    let mut pieces = Sketch::default();
    let mut features = TextFeatures::new(input.context);
    let mut rest: &[u8] = &input.text;
    for &cut in &input.cuts {
        let (piece, after) = rest.split_at(usize::from(cut).min(rest.len()));
        features.feed(piece, &mut pieces);
        rest = after;
    }
    features.feed(rest, &mut pieces);
    features.finish(&mut pieces);
    assert_eq!(whole, pieces, "cut at {:?}", input.cuts);

    if let Ok(text) = std::str::from_utf8(&input.text) {
        let code_points: Vec<u32> = text.chars().map(u32::from).collect();
        let mut read = Sketch::default();
        let mut features = TextFeatures::new(input.context);
        features.feed_code_points(&code_points, &mut read);
        features.finish(&mut read);
        assert_eq!(whole, read);
    }
});
