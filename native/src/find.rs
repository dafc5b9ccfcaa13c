//! Byte searches with Python's `bytes.find` / `rfind` / `count` semantics (half-open ranges,
//! clipped to the haystack), on glibc's vectorised memchr/memrchr.

use std::os::raw::{c_int, c_void};

extern "C" {
    fn memchr(s: *const c_void, c: c_int, n: usize) -> *mut c_void;
    fn memrchr(s: *const c_void, c: c_int, n: usize) -> *mut c_void;
}

/// First `b` in `h[from..to]`.
#[inline]
pub fn byte(h: &[u8], b: u8, from: usize, to: usize) -> Option<usize> {
    let to = to.min(h.len());
    if from >= to {
        return None;
    }
    // SAFETY: the range is inside `h`; memchr reads only those bytes.
    let p = unsafe { memchr(h.as_ptr().add(from) as *const c_void, b as c_int, to - from) };
    if p.is_null() {
        None
    } else {
        Some(p as usize - h.as_ptr() as usize)
    }
}

/// Last `b` in `h[from..to]`.
#[inline]
pub fn rbyte(h: &[u8], b: u8, from: usize, to: usize) -> Option<usize> {
    let to = to.min(h.len());
    if from >= to {
        return None;
    }
    // SAFETY: as above.
    let p = unsafe { memrchr(h.as_ptr().add(from) as *const c_void, b as c_int, to - from) };
    if p.is_null() {
        None
    } else {
        Some(p as usize - h.as_ptr() as usize)
    }
}

/// Does `h[at..]` start with `lit`? Compared byte by byte: with a literal, the compiler unrolls it
/// instead of calling memcmp.
#[inline(always)]
pub fn starts(h: &[u8], at: usize, lit: &[u8]) -> bool {
    if h.len() < at || h.len() - at < lit.len() {
        return false;
    }
    let s = &h[at..at + lit.len()];
    if lit.len() >= 4 {
        // most comparisons fail within the first bytes: one 4-byte compare rejects them
        let w = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if w(s) != w(lit) {
            return false;
        }
        return s[4..] == lit[4..];
    }
    for i in 0..lit.len() {
        if s[i] != lit[i] {
            return false;
        }
    }
    true
}

/// A fast keyed hash for the scanner's byte-string maps (messages, prefixes, counted tails): a
/// multiply-rotate over 8-byte words, seeded per process so inputs cannot be built to collide.
#[derive(Clone, Copy)]
pub struct FxBuild(u64);

impl Default for FxBuild {
    fn default() -> Self {
        use std::hash::BuildHasher as _;
        FxBuild(std::collections::hash_map::RandomState::new().hash_one(0x6e63_646fu64) | 1)
    }
}

pub struct Fx(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl std::hash::BuildHasher for FxBuild {
    type Hasher = Fx;
    #[inline]
    fn build_hasher(&self) -> Fx {
        Fx(self.0)
    }
}

impl std::hash::Hasher for Fx {
    #[inline]
    fn write(&mut self, b: &[u8]) {
        let mut h = self.0;
        let mut c = b.chunks_exact(8);
        for w in &mut c {
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(K);
        }
        let r = c.remainder();
        if !r.is_empty() {
            let mut buf = [0u8; 8];
            buf[..r.len()].copy_from_slice(r);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(buf)).wrapping_mul(K);
        }
        self.0 = h;
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(K);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // fold the high bits down: the table picks buckets with the low ones
        self.0 ^ (self.0 >> 29)
    }
}

pub type FxMap<K, V> = std::collections::HashMap<K, V, FxBuild>;

/// How common a byte is in log text (lower: rarer); `sub` searches for the needle's rarest byte.
const fn commonness_of(b: u8) -> u8 {
    match b {
        b' ' => 9,
        b'e' | b't' | b'a' | b'o' | b'i' | b'n' | b's' | b'r' => 8,
        // "NCCL INFO" is on nearly every line of these logs
        b'0'..=b'9' | b'l' | b'c' | b'd' | b'h' | b'u' | b'm' | b'p' | b'N' | b'C' | b'L' | b'I' | b'F' | b'O' => 7,
        b'a'..=b'z' | b':' | b'/' | b'.' => 6,
        b'A'..=b'Z' => 4,
        _ => 3,
    }
}

/// commonness_of as a table: `sub` runs on every hot line, a load per needle byte is cheaper than the match.
static COMMONNESS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = commonness_of(i as u8);
        i += 1;
    }
    t
};

#[inline(always)]
fn commonness(b: u8) -> u8 {
    COMMONNESS[b as usize]
}

/// `h.find(needle, from, to)`: the first start of `needle` lying wholly in `h[from..to]`.
pub fn sub(h: &[u8], needle: &[u8], from: usize, to: usize) -> Option<usize> {
    let to = to.min(h.len());
    let n = needle.len();
    if n == 0 {
        return if from <= to { Some(from) } else { None };
    }
    if from >= to || to - from < n {
        return None;
    }
    // memchr for the needle's rarest byte, then compare the whole needle around it
    let mut k = 0;
    for (i, &b) in needle.iter().enumerate() {
        if commonness(b) < commonness(needle[k]) {
            k = i;
        }
    }
    let last = to - n; // the last possible start
    let mut i = from;
    while i <= last {
        let at = byte(h, needle[k], i + k, last + k + 1)? - k;
        if starts(h, at, needle) {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

/// Every start of `needle` in `h` (overlapping ones too), in order: candidates where its two rarest
/// bytes stand (64-byte masks), then the whole needle compared.
pub fn find_all(h: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let n = needle.len();
    if n == 0 || h.len() < n {
        return out;
    }
    if n == 1 {
        each_byte(h, needle[0], 0, |p| out.push(p));
        return out;
    }
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by_key(|&i| (commonness(needle[i]), i));
    let (d1, d2) = (idx[0], idx[1]);
    each_pair(h, needle[d1], d1, needle[d2], d2, |p| {
        if p + n <= h.len() && &h[p..p + n] == needle {
            out.push(p);
        }
    });
    out
}

/// `h.rfind(needle, from, to)`.
pub fn rsub(h: &[u8], needle: &[u8], from: usize, to: usize) -> Option<usize> {
    let to = to.min(h.len());
    let n = needle.len();
    if n == 0 {
        return if from <= to { Some(to) } else { None };
    }
    if from >= to || to - from < n {
        return None;
    }
    let mut hi = to - n + 1;          // starts are < hi
    while hi > from {
        let at = rbyte(h, needle[0], from, hi)?;
        if &h[at..at + n] == needle {
            return Some(at);
        }
        hi = at;
    }
    None
}

/// `h.count(b"\n", from, to)`.
pub fn newlines(h: &[u8], from: usize, to: usize) -> usize {
    let to = to.min(h.len());
    if from >= to {
        return 0;
    }
    let mut n = 0usize;
    let mut i = from;
    while i + 64 <= to {
        n += mask64(&h[i..i + 64], b'\n').count_ones() as usize;
        i += 64;
    }
    n + h[i..to].iter().filter(|&&b| b == b'\n').count()
}

#[inline]
pub fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// `\w` of a bytes pattern: [A-Za-z0-9_].
#[inline]
pub fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The end of the run of bytes from `at` for which `f` holds.
#[inline]
pub fn run(h: &[u8], at: usize, f: impl Fn(u8) -> bool) -> usize {
    let mut i = at;
    while i < h.len() && f(h[i]) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_semantics() {
        let h = b"ab\ncab\nab";
        assert_eq!(sub(h, b"ab", 0, 9), Some(0));
        assert_eq!(sub(h, b"ab", 1, 9), Some(4));
        assert_eq!(sub(h, b"ab", 5, 9), Some(7));
        assert_eq!(sub(h, b"ab", 5, 8), None);
        assert_eq!(rsub(h, b"ab", 0, 9), Some(7));
        assert_eq!(rsub(h, b"ab", 0, 8), Some(4));
        assert_eq!(rsub(h, b"ab", 1, 4), None);
        assert_eq!(newlines(h, 0, 9), 2);
        assert_eq!(newlines(h, 3, 2), 0);
        assert_eq!(rbyte(h, b'\n', 0, 6), Some(2));
    }
}

/// Calls `f(i)` for every `i` in `from..h.len()` with `h[i] == b`, in order, 64 bytes at a time
/// (a bit mask per chunk: cheaper than one memchr call per hit when hits are a line apart).
#[inline]
pub fn each_byte(h: &[u8], b: u8, from: usize, mut f: impl FnMut(usize)) {
    let n = h.len();
    let mut i = from;
    while i + 64 <= n {
        let mut m = mask64(&h[i..i + 64], b);
        while m != 0 {
            f(i + m.trailing_zeros() as usize);
            m &= m - 1;
        }
        i += 64;
    }
    while i < n {
        if h[i] == b {
            f(i);
        }
        i += 1;
    }
}

/// Calls `f(i)` for every `i` with `h[i + d1] == b1 && h[i + d2] == b2` (a two-byte prefilter for a
/// needle), `i + max(d1, d2) < h.len()`.
#[inline]
pub fn each_pair(h: &[u8], b1: u8, d1: usize, b2: u8, d2: usize, mut f: impl FnMut(usize)) {
    let d = d1.max(d2);
    if h.len() <= d {
        return;
    }
    let last = h.len() - d; // candidates are < last
    let mut i = 0;
    while i + 64 <= last {
        let mut m = mask64(&h[i + d1..i + d1 + 64], b1) & mask64(&h[i + d2..i + d2 + 64], b2);
        while m != 0 {
            f(i + m.trailing_zeros() as usize);
            m &= m - 1;
        }
        i += 64;
    }
    while i < last {
        if h[i + d1] == b1 && h[i + d2] == b2 {
            f(i);
        }
        i += 1;
    }
}

/// The first `\r` or `\n` at or after `from` (or `h.len()`): where a message ends.
#[inline]
pub fn line_end(h: &[u8], from: usize) -> usize {
    let n = h.len();
    let mut i = from;
    while i + 64 <= n {
        let m = mask64(&h[i..i + 64], b'\n') | mask64(&h[i..i + 64], b'\r');
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 64;
    }
    while i < n && h[i] != b'\n' && h[i] != b'\r' {
        i += 1;
    }
    i
}

/// Bit k set where `c[k] == b` (`c` is 64 bytes).
#[inline(always)]
fn mask64(c: &[u8], b: u8) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86_64; the four loads read c[0..64].
        unsafe {
            let p = c.as_ptr() as *const __m128i;
            let v = _mm_set1_epi8(b as i8);
            let m0 = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p), v)) as u32 as u64;
            let m1 = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(1)), v)) as u32 as u64;
            let m2 = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(2)), v)) as u32 as u64;
            let m3 = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(3)), v)) as u32 as u64;
            m0 | (m1 << 16) | (m2 << 32) | (m3 << 48)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u64;
        for (k, &x) in c[..64].iter().enumerate() {
            m |= ((x == b) as u64) << k;
        }
        m
    }
}

#[cfg(test)]
mod simd_tests {
    use super::*;

    #[test]
    fn masks_agree_with_a_scan() {
        let h: Vec<u8> = (0..1000u32).map(|i| b"LxvLa via L\n"[(i * 7 % 12) as usize]).collect();
        let mut got = Vec::new();
        each_byte(&h, b'L', 3, |i| got.push(i));
        let want: Vec<usize> = (3..h.len()).filter(|&i| h[i] == b'L').collect();
        assert_eq!(got, want);
        let mut got = Vec::new();
        each_pair(&h, b'v', 1, b'a', 3, |i| got.push(i));
        let want: Vec<usize> = (0..h.len() - 3).filter(|&i| h[i + 1] == b'v' && h[i + 3] == b'a').collect();
        assert_eq!(got, want);
    }
}
