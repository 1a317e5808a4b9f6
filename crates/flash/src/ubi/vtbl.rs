//! The volume table, as Linux UBI keeps it (`struct ubi_vtbl_record`): an array of
//! 172-byte records, one per volume slot, in both LEBs of the internal *layout volume*
//! (two copies, so a cut while one is rewritten leaves the other). A slot's index is the
//! volume's ID; an unused slot is all zeros with its CRC.
//!
//! Record, big-endian: reserved PEBs (4), alignment (4), data pad (4), volume type (1),
//! update marker (1), name length (2), name (128, NUL-padded), flags (1), padding (23),
//! CRC-32 of the first 168 bytes (4).

use super::header::{linux_crc32, VOL_DYNAMIC, VOL_STATIC};

/// Bytes of a record (`UBI_VTBL_RECORD_SIZE`).
pub const RECORD_BYTES: usize = 172;
const CRC_COVERS: usize = RECORD_BYTES - 4;
/// Volume slots at most (`UBI_MAX_VOLUMES`).
pub const MAX_VOLUMES: u32 = 128;
/// Bytes of a volume name at most (`UBI_VOL_NAME_MAX`).
pub const NAME_MAX: usize = 127;
/// The layout volume's ID (`UBI_LAYOUT_VOLUME_ID`), its LEBs, and its compatibility flag
/// (`UBI_COMPAT_REJECT`: a UBI that does not know it must refuse the device).
pub const LAYOUT_VOLUME_ID: u32 = 0x7FFF_EFFF;
pub const LAYOUT_VOLUME_EBS: u32 = 2;
pub const LAYOUT_COMPAT: u8 = 5;
/// `UBI_VTBL_AUTORESIZE_FLG`: the volume grows to fill the device at the first attach.
pub const FLAG_AUTORESIZE: u8 = 1;

/// One volume, as its record describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Volume {
    pub id: u32,
    pub name: String,
    /// [`VOL_DYNAMIC`] or [`VOL_STATIC`].
    pub vol_type: u8,
    /// LEBs of the volume.
    pub reserved_pebs: u32,
    pub alignment: u32,
    pub data_pad: u32,
    pub flags: u8,
    /// Set while an update of a static volume is under way (a cut leaves it set).
    pub upd_marker: bool,
}

impl Volume {
    /// A dynamic volume of `lebs` LEBs.
    pub fn dynamic(id: u32, name: &str, lebs: u32) -> Self {
        Volume {
            id,
            name: name.to_string(),
            vol_type: VOL_DYNAMIC,
            reserved_pebs: lebs,
            alignment: 1,
            data_pad: 0,
            flags: 0,
            upd_marker: false,
        }
    }

    pub fn type_name(&self) -> &'static str {
        if self.vol_type == VOL_STATIC {
            "static"
        } else {
            "dynamic"
        }
    }
}

/// Slots of a volume table in a LEB of `leb_bytes` (Linux: as many records as fit, at most
/// [`MAX_VOLUMES`]).
pub fn slots(leb_bytes: u32) -> u32 {
    (leb_bytes / RECORD_BYTES as u32).min(MAX_VOLUMES)
}

fn empty_record() -> [u8; RECORD_BYTES] {
    let mut r = [0u8; RECORD_BYTES];
    let crc = linux_crc32(&r[..CRC_COVERS]);
    r[CRC_COVERS..].copy_from_slice(&crc.to_be_bytes());
    r
}

fn encode_record(v: &Volume) -> [u8; RECORD_BYTES] {
    let mut r = [0u8; RECORD_BYTES];
    r[0..4].copy_from_slice(&v.reserved_pebs.to_be_bytes());
    r[4..8].copy_from_slice(&v.alignment.to_be_bytes());
    r[8..12].copy_from_slice(&v.data_pad.to_be_bytes());
    r[12] = v.vol_type;
    r[13] = u8::from(v.upd_marker);
    let name = &v.name.as_bytes()[..v.name.len().min(NAME_MAX)];
    r[14..16].copy_from_slice(&(name.len() as u16).to_be_bytes());
    r[16..16 + name.len()].copy_from_slice(name);
    r[144] = v.flags;
    let crc = linux_crc32(&r[..CRC_COVERS]);
    r[CRC_COVERS..].copy_from_slice(&crc.to_be_bytes());
    r
}

/// The table's bytes: a record per slot (`volumes` in theirs, the rest empty).
pub fn encode(volumes: &[Volume], slots: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(slots as usize * RECORD_BYTES);
    for slot in 0..slots {
        match volumes.iter().find(|v| v.id == slot) {
            Some(v) => out.extend_from_slice(&encode_record(v)),
            None => out.extend_from_slice(&empty_record()),
        }
    }
    out
}

/// A layout LEB's pages (data and a blank OOB each): the table of `volumes` for a LEB of
/// `leb_bytes`, in pages of `page` bytes, the last one padded with 0xFF.
pub fn table_pages(
    volumes: &[Volume],
    leb_bytes: u32,
    page: usize,
    oob: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    encode(volumes, slots(leb_bytes))
        .chunks(page)
        .map(|part| {
            let mut data = part.to_vec();
            data.resize(page, 0xFF);
            (data, vec![0xFF; oob])
        })
        .collect()
}

/// The volumes of a table copy (`bytes`: a layout LEB's data), or why it is not a valid
/// one. Like Linux's `vtbl_check`: every record's CRC must hold and its fields make sense
/// (an empty record is all zeros); two volumes may not share a name.
pub fn decode(bytes: &[u8], slots: u32, leb_bytes: u32) -> Result<Vec<Volume>, String> {
    let mut volumes: Vec<Volume> = Vec::new();
    for slot in 0..slots {
        let at = slot as usize * RECORD_BYTES;
        let Some(r) = bytes.get(at..at + RECORD_BYTES) else {
            return Err(format!("the table ends before slot {slot}"));
        };
        let crc = u32::from_be_bytes(r[CRC_COVERS..].try_into().expect("4 bytes"));
        if linux_crc32(&r[..CRC_COVERS]) != crc {
            return Err(format!("record {slot} fails its CRC"));
        }
        let be32 = |i: usize| u32::from_be_bytes(r[i..i + 4].try_into().expect("4 bytes"));
        let reserved_pebs = be32(0);
        if reserved_pebs == 0 {
            if r[..CRC_COVERS].iter().any(|&b| b != 0) {
                return Err(format!("record {slot} is empty but not zeroed"));
            }
            continue;
        }
        let name_len = usize::from(u16::from_be_bytes([r[14], r[15]]));
        let (alignment, data_pad, vol_type) = (be32(4), be32(8), r[12]);
        let bad = if name_len == 0 || name_len > NAME_MAX {
            Some(format!("a name of {name_len} bytes"))
        } else if !matches!(vol_type, VOL_DYNAMIC | VOL_STATIC) {
            Some(format!("volume type {vol_type}"))
        } else if alignment == 0 || alignment > leb_bytes || data_pad >= leb_bytes {
            Some(format!("alignment {alignment}, data pad {data_pad}"))
        } else if r[13] > 1 {
            Some(format!("update marker {}", r[13]))
        } else if r[16 + name_len..144].iter().any(|&b| b != 0) {
            Some("bytes after its name".to_string())
        } else {
            None
        };
        if let Some(why) = bad {
            return Err(format!("record {slot} is invalid: {why}"));
        }
        let Ok(name) = String::from_utf8(r[16..16 + name_len].to_vec()) else {
            return Err(format!("record {slot}'s name is not UTF-8"));
        };
        if volumes.iter().any(|v| v.name == name) {
            return Err(format!("two volumes are named {name:?}"));
        }
        volumes.push(Volume {
            id: slot,
            name,
            vol_type,
            reserved_pebs,
            alignment,
            data_pad,
            flags: r[144],
            upd_marker: r[13] == 1,
        });
    }
    Ok(volumes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ubinize's empty record ends in CRC 0xf116c36b (seen in its image at the end of
    /// the 128th slot).
    #[test]
    fn an_empty_record_is_ubinizes() {
        assert_eq!(&empty_record()[CRC_COVERS..], &[0xf1, 0x16, 0xc3, 0x6b]);
    }

    #[test]
    fn a_table_round_trips_and_refuses_damage() {
        let vols = vec![
            Volume::dynamic(0, "nandkit", 1000),
            Volume {
                vol_type: VOL_STATIC,
                flags: FLAG_AUTORESIZE,
                ..Volume::dynamic(3, "firmware", 7)
            },
        ];
        let leb = 126_976;
        let n = slots(leb);
        assert_eq!(n, 128);
        assert_eq!(slots(30 * 512), 89, "a small-page LEB holds fewer records");
        let bytes = encode(&vols, n);
        assert_eq!(bytes.len(), 128 * RECORD_BYTES);
        assert_eq!(decode(&bytes, n, leb), Ok(vols.clone()));
        let mut flipped = bytes.clone();
        flipped[3 * RECORD_BYTES + 20] ^= 4;
        assert!(decode(&flipped, n, leb).unwrap_err().contains("record 3"));
        assert!(decode(&bytes[..1000], n, leb).is_err(), "short");
        let twins = vec![vols[0].clone(), Volume::dynamic(1, "nandkit", 2)];
        assert!(decode(&encode(&twins, n), n, leb)
            .unwrap_err()
            .contains("two volumes"));
    }
}
