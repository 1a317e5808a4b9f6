//! Where UBIFS reads its LEBs from: a volume of a UBI device, by LEB number. A small cache
//! keeps the LEBs read last (a walk of the index goes back and forth between a few).

use nandkit_flash::ubi::Ubi;
use nandkit_flash::{Flash, FlashError};
use std::collections::VecDeque;
use std::rc::Rc;

/// LEBs of a UBIFS volume, read whole.
pub trait LebSource {
    /// Bytes of a LEB.
    fn leb_size(&self) -> usize;
    /// LEBs of the volume.
    fn leb_count(&self) -> u32;
    /// The LEB's bytes (all 0xFF where nothing was written or it is unmapped); `None` when
    /// a page of it cannot be read.
    fn read_leb(&mut self, lnum: u32) -> Result<Option<Rc<Vec<u8>>>, FlashError>;
    /// The LEB with every page that cannot be read (a page a power cut tore) as zeros: a
    /// scan stops there as at damage.
    fn read_leb_lossy(&mut self, lnum: u32) -> Result<Vec<u8>, FlashError> {
        Ok(match self.read_leb(lnum)? {
            Some(leb) => leb.to_vec(),
            None => vec![0; self.leb_size()],
        })
    }
    /// `len` bytes of a LEB from `offs` (the caller keeps within the LEB); `None` when they
    /// cannot be read. By default the LEB is read whole and cut.
    fn read(&mut self, lnum: u32, offs: usize, len: usize) -> Result<Option<Vec<u8>>, FlashError> {
        Ok(self
            .read_leb(lnum)?
            .map(|leb| leb[offs..offs + len].to_vec()))
    }
}

/// How many LEBs [`UbiVolume`] keeps.
const CACHED_LEBS: usize = 32;

/// A volume of a single-chip UBI device.
pub struct UbiVolume<'a, F: Flash> {
    dev: &'a mut F,
    ubi: &'a Ubi,
    vol: u32,
    lebs: u32,
    leb_size: usize,
    cache: VecDeque<(u32, Option<Rc<Vec<u8>>>)>,
    /// LEBs read from flash (cache misses).
    pub lebs_read: u64,
}

impl<'a, F: Flash> UbiVolume<'a, F> {
    /// Volume `vol` of `ubi`; `None` if the volume table has no such volume.
    pub fn new(dev: &'a mut F, ubi: &'a Ubi, vol: u32) -> Option<Self> {
        let v = ubi.volumes().iter().find(|v| v.id == vol)?;
        let page = dev.geometry().page_size_bytes as usize;
        let leb_size = ubi.leb_pages() as usize * page - v.data_pad as usize;
        Some(UbiVolume {
            lebs: v.reserved_pebs,
            dev,
            ubi,
            vol,
            leb_size,
            cache: VecDeque::new(),
            lebs_read: 0,
        })
    }
}

impl<F: Flash> LebSource for UbiVolume<'_, F> {
    fn leb_size(&self) -> usize {
        self.leb_size
    }

    fn leb_count(&self) -> u32 {
        self.lebs
    }

    fn read_leb(&mut self, lnum: u32) -> Result<Option<Rc<Vec<u8>>>, FlashError> {
        if let Some((_, leb)) = self.cache.iter().find(|(l, _)| *l == lnum) {
            return Ok(leb.clone());
        }
        self.lebs_read += 1;
        let leb = self
            .ubi
            .read_leb(self.dev, 0, self.vol, lnum)?
            .map(|mut b| {
                b.truncate(self.leb_size);
                Rc::new(b)
            });
        if self.cache.len() == CACHED_LEBS {
            self.cache.pop_front();
        }
        self.cache.push_back((lnum, leb.clone()));
        Ok(leb)
    }
}

/// A volume held in memory (tests, and images read from a file of LEBs).
pub struct MemVolume {
    pub leb_size: usize,
    pub lebs: Vec<Rc<Vec<u8>>>,
}

impl MemVolume {
    /// Cuts a UBIFS image as mkfs.ubifs writes it (`-o`: LEBs back to back, the last ones
    /// left out when empty) into LEBs of `leb_size`, with `count` LEBs in all.
    pub fn from_image(bytes: &[u8], leb_size: usize, count: u32) -> MemVolume {
        let lebs = (0..count as usize)
            .map(|i| {
                let mut leb = vec![0xFF; leb_size];
                if let Some(part) = bytes.get(i * leb_size..) {
                    let n = part.len().min(leb_size);
                    leb[..n].copy_from_slice(&part[..n]);
                }
                Rc::new(leb)
            })
            .collect();
        MemVolume { leb_size, lebs }
    }
}

impl LebSource for MemVolume {
    fn leb_size(&self) -> usize {
        self.leb_size
    }

    fn leb_count(&self) -> u32 {
        self.lebs.len() as u32
    }

    fn read_leb(&mut self, lnum: u32) -> Result<Option<Rc<Vec<u8>>>, FlashError> {
        Ok(self.lebs.get(lnum as usize).cloned())
    }
}
