//! Images of the previous on-flash format (version 1) are refused with a clear error: this
//! recognises their page tags (40 bytes, in the OOB after the bad-block marker on
//! large-page chips, at the end of the data area on small-page chips).

use super::crc;

const V1_TAG_BYTES: usize = 40;

/// Do these bytes hold valid version-1 tags?
pub fn is_v1_tags(b: &[u8]) -> bool {
    let Some(b) = b.get(..V1_TAG_BYTES) else {
        return false;
    };
    let stored = u32::from_le_bytes(b[36..40].try_into().expect("4 bytes"));
    b[1] == 1 && (1..=3).contains(&b[0]) && crc(&b[..36]) == stored
}

/// Does a page (data and OOB) carry version-1 tags in either place they could be?
pub fn is_v1_page(data: &[u8], oob: &[u8]) -> bool {
    oob.get(2..).is_some_and(is_v1_tags)
        || data
            .len()
            .checked_sub(V1_TAG_BYTES)
            .is_some_and(|at| is_v1_tags(&data[at..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_v1_tags() {
        let mut t = [0u8; 40];
        t[0] = 2;
        t[1] = 1;
        let c = crc(&t[..36]);
        t[36..].copy_from_slice(&c.to_le_bytes());
        let mut oob = vec![0xFF; 64];
        oob[2..42].copy_from_slice(&t);
        assert!(is_v1_page(&[0xFF; 2048], &oob));
        let mut data = vec![0u8; 512];
        data[472..].copy_from_slice(&t);
        assert!(is_v1_page(&data, &[0xFF; 16]));
        assert!(!is_v1_page(&[0xFF; 2048], &[0xFF; 64]));
    }
}
