//! BENCH.md's deterministic data generator: splitmix64, the 260-word vocabulary, `words(lo, hi)`
//! and branch ids (first 32 hex chars of sha256("node-{i}")).

/// splitmix64 (64-bit wrapping arithmetic).
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `next() % n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `lo + below(hi - lo + 1)`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// `between(lo, hi)` vocabulary words, each `VOCAB[below(260)]`, joined by spaces.
    pub fn words(&mut self, lo: u64, hi: u64) -> String {
        let vocab = vocab();
        let count = self.between(lo, hi);
        let mut out = String::new();
        for i in 0..count {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(&vocab[self.below(vocab.len() as u64) as usize]);
        }
        out
    }
}

const PREFIXES: [&str; 16] = [
    "mpi", "omp", "gpu", "cache", "sten", "kern", "thr", "vec", "mem", "loop", "tile", "grid", "solv",
    "bench", "flop", "node",
];
const SUFFIXES: [&str; 16] = [
    "a", "tune", "bw", "lat", "opt", "run", "fail", "ok", "size", "cfg", "err", "perf", "sync", "pin",
    "numa", "time",
];

/// The 260 words: prefix+suffix in prefix-major order, then four plain words.
pub fn vocab() -> &'static [String] {
    static VOCAB: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    VOCAB.get_or_init(|| {
        let mut words: Vec<String> =
            PREFIXES.iter().flat_map(|p| SUFFIXES.iter().map(move |s| format!("{p}{s}"))).collect();
        words.extend(["draft", "debug", "improve", "resource"].map(String::from));
        assert_eq!(words.len(), 260);
        words
    })
}

pub const EVENT_KINDS: [&str; 5] = ["note", "node_result", "error", "plan", "metric"];
pub const PHASES: [&str; 5] = ["draft", "debug", "improve", "execution_review", "compile"];

/// The branch id of node `i`: the first 32 hex characters of sha256("node-{i}").
pub fn node_id(i: usize) -> String {
    let digest = sha256(format!("node-{i}").as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (FIPS 180-4). Small inputs only need speed enough for a few thousand branch ids.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (t, word) in block.chunks_exact(4).enumerate() {
            w[t] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for t in 16..64 {
            let s0 = w[t - 15].rotate_right(7) ^ w[t - 15].rotate_right(18) ^ (w[t - 15] >> 3);
            let s1 = w[t - 2].rotate_right(17) ^ w[t - 2].rotate_right(19) ^ (w[t - 2] >> 10);
            w[t] = w[t - 16].wrapping_add(s0).wrapping_add(w[t - 7]).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for t in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[t]).wrapping_add(w[t]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (state, add) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *state = state.wrapping_add(add);
        }
    }
    let mut out = [0u8; 32];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// The defaults, without automatic consolidation: BENCH.md's workloads count every row they
/// write (workload b also runs a variant with it on).
pub fn bench_config() -> memctl_core::Config {
    memctl_core::Config { auto_consolidate: false, ..memctl_core::Config::default() }
}

/// `count` search queries of one to three words from the vocabulary, always the same.
pub fn query_words(count: usize) -> Vec<String> {
    let vocab = vocab();
    let mut rng = Rng::new(0x5EA);
    (0..count)
        .map(|j| {
            (0..1 + j % 3)
                .map(|_| vocab[rng.below(vocab.len() as u64) as usize].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn sha256_known_answers() {
        assert_eq!(hex(&sha256(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex(&sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        // Two blocks of padding.
        assert_eq!(
            hex(&sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }

    #[test]
    fn node_ids_are_sha256_prefixes() {
        // printf 'node-0' | sha256sum
        assert_eq!(node_id(0), "7c6cc41e6bf72e7a7cd7b752d70b12e7");
        assert_eq!(node_id(7), hex(&sha256(b"node-7"))[..32]);
    }

    #[test]
    fn splitmix64_reference_values() {
        // Reference outputs of splitmix64 seeded with 0.
        let mut rng = Rng::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn vocabulary_order() {
        let v = vocab();
        assert_eq!(v[0], "mpia");
        assert_eq!(v[1], "mpitune");
        assert_eq!(v[16], "ompa");
        assert_eq!(v[255], "nodetime");
        assert_eq!(&v[256..], ["draft", "debug", "improve", "resource"]);
        let mut rng = Rng::new(0xB0B);
        let text = rng.words(10, 30);
        let n = text.split(' ').count();
        assert!((10..=30).contains(&n));
    }
}
