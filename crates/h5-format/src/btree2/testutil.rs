//! Test helpers shared by the v2 B-tree, fixed array and extensible array tests: a local
//! reference copy of Jenkins lookup3 (so the tests do not trust the code under test) and
//! corruption sweeps.

/// Reference Jenkins lookup3 (hashlittle), written from the published algorithm.
pub(crate) fn lookup3(data: &[u8], initval: u32) -> u32 {
    fn word(s: &[u8]) -> u32 {
        let mut b = [0u8; 4];
        b[..s.len()].copy_from_slice(s);
        u32::from_le_bytes(b)
    }
    fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(4);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(6);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(8);
        *b = b.wrapping_add(*a);
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(16);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(19);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(4);
        *b = b.wrapping_add(*a);
    }
    let init = 0xdead_beefu32
        .wrapping_add(data.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut k = data;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        mix(&mut a, &mut b, &mut c);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    let mut pad = [0u8; 12];
    pad[..k.len()].copy_from_slice(k);
    a = a.wrapping_add(word(&pad[0..4]));
    b = b.wrapping_add(word(&pad[4..8]));
    c = c.wrapping_add(word(&pad[8..12]));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(24));
    c
}

/// Appends the lookup3 checksum of `buf` to it.
pub(crate) fn seal(buf: &mut Vec<u8>) {
    let c = lookup3(buf, 0);
    buf.extend_from_slice(&c.to_le_bytes());
}

/// Little-endian bytes of `v` in `n` bytes.
pub(crate) fn le(v: u64, n: usize) -> Vec<u8> {
    v.to_le_bytes()[..n].to_vec()
}

/// Checks that `decode` accepts `image`, rejects every truncation of its first `used` bytes
/// and every single-byte change within them (all covered by a checksum), without panicking.
pub(crate) fn sweep<T>(image: &[u8], used: usize, decode: impl Fn(&[u8]) -> crate::Result<T>) {
    assert!(decode(image).is_ok(), "the intact image decodes");
    for len in 0..used {
        assert!(decode(&image[..len]).is_err(), "truncated to {len} bytes");
    }
    let mut b = image.to_vec();
    for i in 0..used {
        for flip in [0x01u8, 0x80, 0xff] {
            b[i] ^= flip;
            assert!(decode(&b).is_err(), "byte {i} ^ {flip:#x}");
            b[i] ^= flip;
        }
    }
}

#[test]
fn reference_lookup3_matches_published_vectors() {
    assert_eq!(lookup3(b"", 0), 0xdead_beef);
    assert_eq!(lookup3(b"Four score and seven years ago", 0), 0x1777_0551);
    assert_eq!(lookup3(b"Four score and seven years ago", 1), 0xcd62_8161);
}
