//! The canonical fingerprint (`fingerprint.rs`): arbitrary values built by a walk of
//! open/push/close operations (any nesting, unclosed frames, odd maps, objects with the wrong
//! number of children), driven through one reusable `Canon` as the binding layer drives it.
//!
//! Properties, each against a reference written from the README's encoding table with
//! xxh3 directly (no engine code):
//! - every scalar and container digest is the published encoding;
//! - mappings and sets are order-free: the same tree with the entries of every map and set
//!   shuffled gives the same root digest; a reused `Canon` gives the same digests again;
//! - the small-map functions agree with `Canon::finish_map`;
//! - numbers hash by value: an integral finite float hashes as the equal integer (any size,
//!   sign of zero ignored), every NaN alike, integer magnitudes ignore trailing zero bytes.
#![no_main]

use arbitrary::Arbitrary;
use doomloop_engine::fingerprint::{self as fp, Canon};
use libfuzzer_sys::fuzz_target;
use xxhash_rust::xxh3::xxh3_64_with_seed;

const SEED: u64 = 0x646f_6f6d_6c6f_6f70;
const MAX_OPS: usize = 4096;

fn tagged(tag: u8, payload: &[u8]) -> u64 {
    xxh3_64_with_seed(payload, SEED.wrapping_add(u64::from(tag)))
}

fn le(digests: &[u64]) -> Vec<u8> {
    digests.iter().flat_map(|d| d.to_le_bytes()).collect()
}

/// `I`: sign byte (1 only for a negative non-zero value) + magnitude without trailing zeros.
fn reference_int(negative: bool, magnitude_le: &[u8]) -> u64 {
    let used = magnitude_le.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let mut payload = vec![u8::from(negative && used > 0)];
    payload.extend_from_slice(&magnitude_le[..used]);
    tagged(b'I', &payload)
}

/// The exact magnitude of an integral finite float, by shifting its mantissa one bit at a time
/// (slow and plain, unlike the engine's byte shuffle).
fn integral_magnitude(x: f64) -> Vec<u8> {
    let bits = x.abs().to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64;
    if exponent == 0 {
        return vec![]; // zero (subnormals are never integral)
    }
    let mut mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
    let shift = exponent - 1075;
    if shift <= 0 {
        mantissa >>= -shift; // exact: the value is integral
        return mantissa.to_le_bytes().to_vec();
    }
    let mut bytes = mantissa.to_le_bytes().to_vec();
    for _ in 0..shift {
        let mut carry = 0u8;
        for b in bytes.iter_mut() {
            let next = *b >> 7;
            *b = (*b << 1) | carry;
            carry = next;
        }
        if carry != 0 {
            bytes.push(carry);
        }
    }
    bytes
}

fn reference_f64(x: f64) -> u64 {
    if x.is_finite() && x.fract() == 0.0 {
        return reference_int(x < 0.0, &integral_magnitude(x));
    }
    let bits = if x.is_nan() { 0x7ff8_0000_0000_0000 } else { x.to_bits() };
    tagged(b'F', &bits.to_le_bytes())
}

#[derive(Arbitrary, Debug)]
enum Scalar {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    FloatBits(u64),
    Str(Vec<u8>),
    Bytes(Vec<u8>),
    BigInt(bool, Vec<u8>),
    Error(Vec<u8>),
    Opaque(Vec<u8>),
    Cycle(u64),
    TooDeep,
    Action(u64, u64),
}

/// (engine digest, reference digest) of a scalar.
fn scalar(s: &Scalar) -> (u64, u64) {
    match s {
        Scalar::None => (fp::hash_none(), tagged(b'N', b"")),
        Scalar::Bool(b) => (fp::hash_bool(*b), tagged(b'B', &[u8::from(*b)])),
        Scalar::Int(n) => (fp::hash_i64(*n), reference_int(*n < 0, &n.unsigned_abs().to_le_bytes())),
        Scalar::Float(x) => (fp::hash_f64(*x), reference_f64(*x)),
        Scalar::FloatBits(bits) => {
            let x = f64::from_bits(*bits);
            (fp::hash_f64(x), reference_f64(x))
        }
        Scalar::Str(b) => {
            assert_eq!(fp::hash_str_const(b), fp::hash_str(b));
            (fp::hash_str(b), tagged(b'S', b))
        }
        Scalar::Bytes(b) => (fp::hash_bytes(b), tagged(b'Y', b)),
        Scalar::BigInt(negative, magnitude) => (
            fp::hash_int_magnitude(*negative, magnitude),
            reference_int(*negative, magnitude),
        ),
        Scalar::Error(b) => (fp::hash_error(b), tagged(b'E', b)),
        Scalar::Opaque(b) => (fp::hash_opaque(b), tagged(b'U', b)),
        Scalar::Cycle(d) => (fp::hash_cycle(*d), tagged(b'C', &d.to_le_bytes())),
        Scalar::TooDeep => (fp::hash_too_deep(), tagged(b'X', b"")),
        Scalar::Action(t, a) => (fp::hash_action(*t, *a), tagged(b'A', &le(&[*t, *a]))),
    }
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Seq,
    Map,
    Set,
    Object,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Push(Scalar),
    Open(Kind),
    Close,
}

#[derive(Arbitrary, Debug)]
struct Input {
    ops: Vec<Op>,
    shuffle_seed: u64,
    ints: Vec<(i64, u8)>,
}

enum Node {
    Leaf(u64),
    Container(Kind, Vec<usize>),
}

/// A small deterministic generator for the shuffles.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n.max(1)
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// The order a walk pushes a container's children in: as built, or with map entries (whole
/// key/value pairs; an odd trailing key stays last) and set items shuffled.
fn order(kind: Kind, children: &[usize], rng: &mut Option<Rng>) -> Vec<usize> {
    let Some(rng) = rng.as_mut() else {
        return children.to_vec();
    };
    match kind {
        Kind::Set => {
            let mut items = children.to_vec();
            rng.shuffle(&mut items);
            items
        }
        Kind::Map => {
            let mut pairs: Vec<&[usize]> = children.chunks_exact(2).collect();
            rng.shuffle(&mut pairs);
            let mut items: Vec<usize> = pairs.concat();
            items.extend_from_slice(children.chunks_exact(2).remainder());
            items
        }
        Kind::Seq | Kind::Object => children.to_vec(),
    }
}

fn finish(canon: &mut Canon, kind: Kind, mark: usize) -> u64 {
    match kind {
        Kind::Seq => canon.finish_seq(mark),
        Kind::Map => canon.finish_map(mark),
        Kind::Set => canon.finish_set(mark),
        Kind::Object => canon.finish_object(mark),
    }
}

/// Walk the tree into `canon` with an explicit stack, as the binding layer walks Python
/// values; returns the root's digest.
fn walk(tree: &[Node], canon: &mut Canon, mut rng: Option<Rng>) -> u64 {
    let Some(Node::Container(root_kind, root_children)) = tree.first() else {
        return fp::hash_none();
    };
    let mut stack = vec![(
        *root_kind,
        order(*root_kind, root_children, &mut rng),
        0usize,
        canon.mark(),
    )];
    loop {
        let Some((kind, children, next, mark)) = stack.last_mut() else {
            return fp::hash_none();
        };
        if let Some(&child) = children.get(*next) {
            *next += 1;
            match &tree[child] {
                Node::Leaf(d) => canon.push(*d),
                Node::Container(k, c) => {
                    let m = canon.mark();
                    stack.push((*k, order(*k, c, &mut rng), 0, m));
                }
            }
            continue;
        }
        let (kind, mark) = (*kind, *mark);
        stack.pop();
        let digest = finish(canon, kind, mark);
        if stack.is_empty() {
            return digest;
        }
        canon.push(digest);
    }
}

fuzz_target!(|input: Input| {
    // Build the tree: node 0 is an implicit top-level sequence; children always come after
    // their parent, so digests can be computed from the last node back, with no recursion.
    let mut tree = vec![Node::Container(Kind::Seq, vec![])];
    let mut open = vec![0usize];
    for op in input.ops.iter().take(MAX_OPS) {
        let parent = open.last().copied().unwrap_or(0);
        let new_child = match op {
            Op::Push(s) => {
                let (engine, reference) = scalar(s);
                assert_eq!(engine, reference, "scalar {s:?}");
                tree.push(Node::Leaf(engine));
                None
            }
            Op::Open(kind) => {
                tree.push(Node::Container(*kind, vec![]));
                Some(tree.len() - 1)
            }
            Op::Close => {
                if open.len() > 1 {
                    open.pop();
                }
                continue;
            }
        };
        let index = tree.len() - 1;
        if let Node::Container(_, children) = &mut tree[parent] {
            children.push(index);
        }
        if let Some(child) = new_child {
            open.push(child);
        }
    }

    // Reference digests from the published encoding.
    let none = tagged(b'N', b"");
    let mut digest = vec![0u64; tree.len()];
    for i in (0..tree.len()).rev() {
        digest[i] = match &tree[i] {
            Node::Leaf(d) => *d,
            Node::Container(kind, children) => {
                let ds: Vec<u64> = children.iter().map(|&c| digest[c]).collect();
                match kind {
                    Kind::Seq => tagged(b'L', &le(&ds)),
                    Kind::Set => {
                        let mut sorted = ds;
                        sorted.sort_unstable();
                        tagged(b'T', &le(&sorted))
                    }
                    Kind::Map => {
                        let mut pairs: Vec<u64> = ds
                            .chunks(2)
                            .map(|kv| tagged(b'P', &le(&[kv[0], kv.get(1).copied().unwrap_or(none)])))
                            .collect();
                        pairs.sort_unstable();
                        if ds.len().is_multiple_of(2) && pairs.len() <= fp::SMALL_MAP_ENTRIES {
                            let entries: Vec<(u64, u64)> = ds.chunks_exact(2).map(|kv| (kv[0], kv[1])).collect();
                            let expected = tagged(b'D', &le(&pairs));
                            assert_eq!(fp::hash_map_entries(&entries), Some(expected));
                            let mut shuffled: Vec<u64> = entries.iter().map(|&(k, v)| fp::hash_pair(k, v)).collect();
                            shuffled.reverse();
                            assert_eq!(fp::hash_map_pairs(&mut shuffled), Some(expected));
                        }
                        tagged(b'D', &le(&pairs))
                    }
                    Kind::Object => {
                        let type_name = ds.first().copied().unwrap_or(none);
                        let state = ds.get(1).copied().unwrap_or(none);
                        tagged(b'O', &le(&[type_name, state]))
                    }
                }
            }
        };
    }
    let expected = digest[0];

    let mut canon = Canon::new();
    let root = walk(&tree, &mut canon, None);
    assert_eq!(root, expected, "Canon differs from the published encoding");
    assert_eq!(canon.mark(), 0, "a finished walk leaves nothing on the stack");
    canon.push(root);
    assert_eq!(canon.pop_root(), root);
    // Reused, and with every map's and set's entries in another order: the same digest.
    let shuffled = walk(&tree, &mut canon, Some(Rng(input.shuffle_seed)));
    assert_eq!(shuffled, expected, "maps and sets must be order-free");
    assert_eq!(
        canon.pop_root(),
        fp::hash_none(),
        "pop_root of an empty stack is None's digest"
    );
    // An aborted walk: clear() leaves the Canon as good as new.
    canon.push(1);
    canon.clear();
    assert_eq!(walk(&tree, &mut canon, None), expected);

    // Numbers hash by value.
    for &(n, extra_zeros) in input.ints.iter().take(64) {
        let mut magnitude = n.unsigned_abs().to_le_bytes().to_vec();
        magnitude.extend(std::iter::repeat_n(0, usize::from(extra_zeros % 24)));
        assert_eq!(fp::hash_int_magnitude(n < 0, &magnitude), fp::hash_i64(n), "{n}");
        let x = n as f64;
        // Where the conversion is exact, the float hashes as the integer.
        if x != 9_223_372_036_854_775_808.0 && x as i64 == n {
            assert_eq!(fp::hash_f64(x), fp::hash_i64(n), "{n} as float");
        }
        assert_eq!(fp::hash_f64(x), reference_f64(x));
        assert_eq!(fp::hash_f64(-x), reference_f64(-x));
    }
    assert_eq!(fp::hash_f64(-0.0), fp::hash_i64(0));
    assert_eq!(fp::hash_int_magnitude(true, &[0, 0]), fp::hash_i64(0));
});
