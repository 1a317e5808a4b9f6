//! A UBI per chip, as MA builds its array (section 3.2, Figure 5): every chip is its own
//! device with its own erase-block layer, and the striped view maps logical erase block
//! (LEB) i of the array to LEB i of every chip.
//!
//! Each chip's layer is Linux UBI, in Linux's on-flash format ([`header`], [`vtbl`]):
//! - **mapping**: a LEB lives in whichever physical erase block (PEB) UBI chose; the map is
//!   rebuilt at attach from the two headers at the start of every PEB, so a LEB holds
//!   `pages_per_block - 2` pages (`- 1` on an image made with sub-pages);
//! - **volumes**: every chip carries Linux's layout volume (two LEBs holding the volume
//!   table) and the file system's volume, named [`FS_VOLUME`] (or [`FS_PARITY_VOLUME`] in
//!   an array with parity), volume 0; volumes another tool put there are kept as they are
//!   and can be read ([`Ubi::read_leb`]);
//! - **bad blocks**: a PEB whose erase, or the EC header programmed right after it, fails
//!   is retired (a worn block fails there first: its next program is that header); a
//!   fixed reserve per chip (`bad_per_1024`, UBI's `CONFIG_MTD_UBI_BEB_LIMIT`, 20 per 1024
//!   PEBs by default) absorbs factory and grown bad blocks, so the volume's size is the
//!   same on every chip and a bad block costs one PEB of one chip, not a stripe;
//! - **erase counters** in every PEB's EC header, kept across erases;
//! - **wear levelling** ([`wear_level`]): new data goes to a free PEB of middling wear, and
//!   when a worn free PEB has been erased `wl_threshold` more times than the least-worn
//!   used one, that long-lived LEB is moved onto it;
//! - **unmap**: erasing a LEB unmaps it at once and erases its PEB in the background: the
//!   chip is busy, the caller is not.
//!
//! Crash rules (checked by the array crash sweeps): a PEB's EC header is written right after
//! its erase, a VID header before the first data page of a mapping; a torn or missing
//! header makes the PEB dirty (erased again before use, with the mean erase count); of two
//! PEBs claiming one LEB the newer wins unless it is a copy whose data CRC fails.

mod attach;
mod check;
mod chip_map;
pub mod header;
pub mod legacy;
pub mod raw;
pub mod vtbl;
mod wear_level;

use crate::command::{Command, Completion, Reply};
use crate::device::Flash;
use crate::ecc::EccReport;
use crate::error::FlashError;
use crate::geometry::{BlockAddr, Geometry, PageAddr};
pub use attach::probe;
use chip_map::ChipMap;
use header::{linux_crc32, EcHeader, Layout, VidHeader};
use serde::Serialize;
use vtbl::{Volume, LAYOUT_COMPAT, LAYOUT_VOLUME_EBS, LAYOUT_VOLUME_ID};

/// The name of the volume a nandkit file system lives in, on every chip of an array...
pub const FS_VOLUME: &str = "nandkit";
/// ...and in an array with parity (each chip's volume is then a column of the stripes).
pub const FS_PARITY_VOLUME: &str = "nandkit-parity";
/// The file system volume's ID.
pub const FS_VOLUME_ID: u32 = 0;
/// PEBs Linux keeps out of every volume besides the bad-block reserve: one for wear
/// levelling (`WL_RESERVED_PEBS`), one for atomic LEB changes (`EBA_RESERVED_PEBS`), and
/// the layout volume's two (`UBI_LAYOUT_VOLUME_EBS`).
pub const RESERVED_PEBS: u32 = 2 + LAYOUT_VOLUME_EBS;

/// Parameters chosen when an array is formatted with UBI. On flash they leave the volume's
/// size (in the volume table) and the array's kind (the volume's name); the threshold is an
/// attach parameter, as Linux's `CONFIG_MTD_UBI_WL_THRESHOLD` is (see [`AttachOptions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UbiParams {
    /// PEBs per 1024 kept for bad blocks over the chip's life (UBI's default: 20).
    pub bad_per_1024: u32,
    /// Erase-count spread that triggers a wear-levelling move (UBI's default: 4096).
    pub wl_threshold: u32,
    /// The array above keeps parity across chips: it addresses each chip's LEBs itself
    /// ([`Ubi::geometry`] is then one chip's volume, chip by chip) and goes on without a
    /// chip that fails whole.
    pub parity: bool,
}

impl Default for UbiParams {
    fn default() -> Self {
        Self {
            bad_per_1024: 20,
            wl_threshold: 4096,
            parity: false,
        }
    }
}

impl UbiParams {
    /// Bad PEBs a chip of `pebs` blocks may have before UBI runs out of spares.
    pub fn bad_limit(&self, pebs: u32) -> u32 {
        (u64::from(pebs) * u64::from(self.bad_per_1024)).div_ceil(1024) as u32
    }

    /// LEBs of the file system's volume on a chip of `pebs` blocks: all but the bad-block
    /// reserve, the layout volume and UBI's WL and EBA reserves ([`RESERVED_PEBS`]).
    pub fn lebs(&self, pebs: u32) -> Option<u32> {
        pebs.checked_sub(self.bad_limit(pebs) + RESERVED_PEBS)
            .filter(|&n| n > 0)
    }
}

/// What an attach takes from outside the flash (Linux: the kernel's configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttachOptions {
    /// Erase-count spread that triggers a wear-levelling move.
    pub wl_threshold: u32,
    /// The volume the array above addresses, by number: by default the one named
    /// [`FS_VOLUME`] (or [`FS_PARITY_VOLUME`]); another tool's dynamic volume (a board's
    /// UBIFS) when set.
    pub volume: Option<u32>,
}

impl Default for AttachOptions {
    fn default() -> Self {
        Self {
            wl_threshold: UbiParams::default().wl_threshold,
            volume: None,
        }
    }
}

/// One volume as `info` shows it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VolumeReport {
    pub id: u32,
    pub name: String,
    /// "dynamic" or "static".
    pub kind: String,
    /// LEBs the volume table gives it.
    pub lebs: u32,
    /// LEBs mapped (on every chip together).
    pub mapped: u32,
    /// Whether nandkit mounts it (the file system's volume).
    pub file_system: bool,
}

/// A PEB as [`Ubi::pebs_of`] shows it: its erase counter (`None` if bad) and the
/// (volume, LEB) it holds, if any.
pub type PebView = (Option<u32>, Option<(u32, u32)>);

/// What UBI did since attach, and what each chip holds (for `info`, fsck and benches).
#[derive(Clone, Debug, Default, Serialize)]
pub struct UbiReport {
    pub lebs_per_chip: u32,
    /// Byte offsets of the VID header and the data in a PEB.
    pub vid_hdr_offset: u32,
    pub data_offset: u32,
    pub image_seq: u32,
    /// The volumes of chip 0's volume table (the first chip that answers).
    pub volumes: Vec<VolumeReport>,
    pub wl_threshold: u32,
    /// EC and VID header pages programmed (UBI's own writes).
    pub header_programs: u64,
    /// LEBs moved by wear levelling, and the pages those moves copied.
    pub wl_moves: u64,
    /// Of those moves, the ones of LEBs of other volumes than the file system's (the
    /// layout volume's two per chip, which are cold: written once at format).
    pub wl_moves_other_volumes: u64,
    pub wl_pages_copied: u64,
    /// PEBs retired because an erase or program failed.
    pub grown_bad: u64,
    /// Chips that failed whole (an array with parity goes on without them).
    pub dead_chips: Vec<u32>,
    /// Why UBI refuses writes (a chip past its spares), if it does.
    pub read_only: Option<String>,
    pub chips: Vec<UbiChipReport>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct UbiChipReport {
    pub chip: u32,
    pub pebs: u32,
    pub bad: u32,
    pub bad_limit: u32,
    pub mapped_lebs: u32,
    pub free_pebs: u32,
    pub ec_min: u32,
    pub ec_max: u32,
    pub ec_mean: f64,
}

#[derive(Default)]
struct Counters {
    header_programs: u64,
    wl_moves: u64,
    wl_moves_other_volumes: u64,
    wl_pages_copied: u64,
    grown_bad: u64,
}

/// The UBI layers of all chips of an array, driven by the striped view.
pub struct Ubi {
    maps: Vec<ChipMap>,
    /// The chip's geometry (physical).
    chip: Geometry,
    /// Where the headers and data sit in a PEB.
    layout: Layout,
    /// The volume table (the same on every chip).
    volumes: Vec<Volume>,
    /// The file system's volume and its LEBs per chip (0 if the table has none).
    fs_vol: Option<u32>,
    fs_lebs: u32,
    image_seq: u32,
    params: UbiParams,
    counters: Counters,
    /// Attached read-only (fsck, info): wear levelling writes nothing.
    read_only: bool,
    /// PEBs wear levelling could not read: not tried again until they are erased.
    wl_skip: std::collections::BTreeSet<(u32, u32)>,
    /// Set when a chip has too few good PEBs left to hold every LEB and a spare: UBI then
    /// refuses every program and erase (Linux UBI's read-only mode), and reads go on.
    worn_out: Option<String>,
    /// Per chip: it failed whole (only an array with parity attaches without a chip).
    dead: Vec<bool>,
    /// The volume the attach was asked to address instead of nandkit's own.
    chosen_volume: Option<u32>,
}

/// A page as read: its data and its OOB.
type Page = (Vec<u8>, Vec<u8>);

/// What a physical command in a UBI batch is for, to settle the pools after it ran.
enum Role {
    /// Answers its slot (a read, a data program, a spare program).
    Data,
    /// An erase or EC header of `peb` of `chip` going back to the pool with erase count `ec`.
    Recycle { chip: u32, peb: u32, ec: u32 },
    /// An erase, EC or VID header preparing `peb` for a new mapping.
    Prepare { chip: u32, peb: u32 },
}

impl Ubi {
    pub fn format<F: Flash>(dev: &mut F, params: UbiParams) -> Result<Self, FlashError> {
        attach::format(dev, params)
    }

    /// A UBI of chips shaped `chip` with no maps yet (format and attach fill them).
    fn new(
        chip: Geometry,
        layout: Layout,
        image_seq: u32,
        params: UbiParams,
        read_only: bool,
    ) -> Self {
        Ubi {
            maps: Vec::new(),
            chip,
            layout,
            volumes: Vec::new(),
            fs_vol: None,
            fs_lebs: 0,
            image_seq,
            params,
            counters: Counters::default(),
            read_only,
            wl_skip: std::collections::BTreeSet::new(),
            worn_out: None,
            dead: vec![false; chip.chips as usize],
            chosen_volume: None,
        }
    }

    /// The chips that failed whole.
    pub fn dead_chips(&self) -> Vec<u32> {
        (0..self.dead.len() as u32)
            .filter(|&c| self.dead[c as usize])
            .collect()
    }

    pub fn is_dead(&self, chip: u32) -> bool {
        self.dead.get(chip as usize).copied().unwrap_or(false)
    }

    /// This format's image sequence number (the same in every header of every chip).
    pub fn image_seq(&self) -> u32 {
        self.image_seq
    }

    /// Takes a chip that answers out of service, or puts it back (the array above does not
    /// trust its contents until it is rebuilt: see `striped::membership`). Its map stays.
    pub(crate) fn set_dead(&mut self, chip: u32, dead: bool) {
        if let Some(d) = self.dead.get_mut(chip as usize) {
            *d = dead;
        }
    }

    /// The PEB holding `leb` of `chip`, if it is mapped.
    pub fn peb_of(&self, chip: u32, leb: u32) -> Option<u32> {
        self.maps.get(chip as usize)?.peb_of(leb)
    }

    /// Whether `leb` of `chip` is mapped to a PEB.
    pub fn is_mapped(&self, chip: u32, leb: u32) -> bool {
        self.peb_of(chip, leb).is_some()
    }

    /// The array keeps parity (its EC headers say so).
    pub fn parity(&self) -> bool {
        self.params.parity
    }

    /// Rebuilds every chip's map from its headers. Read-only: writes nothing, ever.
    pub fn attach<F: Flash>(
        dev: &mut F,
        read_only: bool,
        options: AttachOptions,
    ) -> Result<Self, FlashError> {
        attach::attach(dev, read_only, options)
    }

    /// LEBs of the file system's volume (the same on every chip).
    pub fn lebs(&self) -> u32 {
        self.fs_lebs
    }

    /// The file system's volume, if the volume table names one.
    pub fn fs_volume(&self) -> Option<&Volume> {
        self.volumes.iter().find(|v| Some(v.id) == self.fs_vol)
    }

    /// The volume table.
    pub fn volumes(&self) -> &[Volume] {
        &self.volumes
    }

    /// Where headers and data sit in a PEB.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Pages of one chip's LEB.
    pub fn leb_pages(&self) -> u32 {
        self.chip.pages_per_block - self.layout.data_page()
    }

    /// The bytes of LEB `leb` of volume `vol` on `chip` (all 0xFF if it is unmapped), or
    /// `None` if a page of it cannot be read.
    pub fn read_leb<F: Flash>(
        &self,
        dev: &mut F,
        chip: u32,
        vol: u32,
        leb: u32,
    ) -> Result<Option<Vec<u8>>, FlashError> {
        let bytes = (self.leb_pages() * self.chip.page_size_bytes) as usize;
        let Some(peb) = self
            .maps
            .get(chip as usize)
            .and_then(|m| m.peb_of_vol(vol, leb))
        else {
            return Ok(Some(vec![0xFF; bytes]));
        };
        Ok(self
            .read_data_pages(dev, chip, peb, self.leb_pages())?
            .map(|pages| pages.into_iter().flat_map(|(d, _)| d).collect()))
    }

    /// Every PEB of `chip`: its erase counter (`None` for a bad PEB) and what it holds
    /// (volume and LEB), for tests and `info`.
    pub fn pebs_of(&self, chip: u32) -> Vec<PebView> {
        self.maps.get(chip as usize).map_or_else(Vec::new, |m| {
            m.pebs
                .iter()
                .map(|p| match p.state {
                    chip_map::PebState::Bad => (None, None),
                    chip_map::PebState::Used { vol, leb } => {
                        (Some(p.ec), Some((chip_map::vol_id(vol), leb)))
                    }
                    _ => (Some(p.ec), None),
                })
                .collect()
        })
    }

    /// The geometry the array above addresses: LEB i of every chip as one block (striped);
    /// with parity, every chip's volume as a chip of its own, its LEBs as blocks.
    pub fn geometry(&self) -> Geometry {
        if self.params.parity {
            return Geometry {
                pages_per_block: self.leb_pages(),
                blocks_per_chip: self.lebs(),
                ..self.chip
            };
        }
        Geometry {
            pages_per_block: self.leb_pages() * self.chip.chips,
            blocks_per_chip: self.lebs(),
            chips: 1,
            ..self.chip
        }
    }

    pub fn report(&self) -> UbiReport {
        let mapped = |vol: u32| -> u32 {
            self.maps
                .iter()
                .map(|m| {
                    m.pebs
                        .iter()
                        .filter(|p| {
                            matches!(p.state, chip_map::PebState::Used { vol: v, .. }
                                if chip_map::vol_id(v) == vol)
                        })
                        .count() as u32
                })
                .sum()
        };
        UbiReport {
            lebs_per_chip: self.lebs(),
            vid_hdr_offset: self.layout.vid_hdr_offset,
            data_offset: self.layout.data_offset,
            image_seq: self.image_seq,
            volumes: self
                .volumes
                .iter()
                .map(|v| VolumeReport {
                    id: v.id,
                    name: v.name.clone(),
                    kind: v.type_name().to_string(),
                    lebs: v.reserved_pebs,
                    mapped: mapped(v.id),
                    file_system: Some(v.id) == self.fs_vol,
                })
                .collect(),
            wl_threshold: self.params.wl_threshold,
            header_programs: self.counters.header_programs,
            wl_moves: self.counters.wl_moves,
            wl_moves_other_volumes: self.counters.wl_moves_other_volumes,
            wl_pages_copied: self.counters.wl_pages_copied,
            grown_bad: self.counters.grown_bad,
            dead_chips: self.dead_chips(),
            read_only: self.worn_out.clone(),
            chips: self
                .maps
                .iter()
                .map(|m| {
                    let (ec_min, ec_max, ec_mean) = m.ec_spread();
                    UbiChipReport {
                        chip: m.chip,
                        pebs: m.pebs.len() as u32,
                        bad: m.bad(),
                        bad_limit: m.bad_limit,
                        mapped_lebs: m.eba.iter().filter(|&&p| p != u32::MAX).count() as u32,
                        free_pebs: m.free.len() as u32,
                        ec_min,
                        ec_max,
                        ec_mean,
                    }
                })
                .collect(),
        }
    }

    /// Problems in the maps against the headers on flash (fsck).
    pub fn check<F: Flash>(&self, dev: &mut F) -> Result<Vec<String>, FlashError> {
        check::check(self, dev)
    }

    /// Where a page of [`Ubi::geometry`] lives: its chip, LEB, page in the PEB, and the
    /// PEB (if the LEB is mapped). A chip that failed whole answers nothing.
    fn locate(&self, addr: PageAddr) -> Result<(u32, u32, u32, Option<u32>), FlashError> {
        self.geometry().check_page(addr)?;
        let (chip, leb_page) = if self.params.parity {
            (addr.chip, addr.page)
        } else {
            let p = self.chip.chips;
            (addr.page % p, addr.page / p)
        };
        if self.is_dead(chip) {
            return Err(FlashError::ChipFailed(chip));
        }
        let peb = self.maps[chip as usize].peb_of(addr.block);
        Ok((chip, addr.block, self.layout.data_page() + leb_page, peb))
    }

    /// A PEB page located by [`Ubi::locate`], if its LEB is mapped.
    fn located(at: (u32, u32, u32, Option<u32>)) -> Option<PageAddr> {
        let (chip, _, page, peb) = at;
        peb.map(|block| PageAddr { chip, block, page })
    }

    /// Largest erase count of the PEBs behind a LEB (the chip's mean where unmapped).
    pub fn erase_count(&self, leb: u32) -> u32 {
        self.maps
            .iter()
            .map(|m| match m.peb_of(leb) {
                Some(peb) => m.pebs[peb as usize].ec,
                None => m.ec_spread().2 as u32,
            })
            .max()
            .unwrap_or(0)
    }

    fn ec_header(&self, ec: u32) -> EcHeader {
        EcHeader {
            ec: u64::from(ec),
            vid_hdr_offset: self.layout.vid_hdr_offset,
            data_offset: self.layout.data_offset,
            image_seq: self.image_seq,
        }
    }

    /// The EC header page of `peb` (with `vid` beside it in a shared layout).
    fn ec_command(&mut self, chip: u32, peb: u32, ec: u32, vid: Option<&VidHeader>) -> Command {
        self.counters.header_programs += 1;
        Command::Program {
            addr: PageAddr {
                chip,
                block: peb,
                page: 0,
            },
            data: self.layout.header_page(&self.ec_header(ec), vid),
            oob: vec![0xFF; self.chip.oob_size_bytes as usize],
        }
    }

    /// The VID header for LEB `leb` of `vol` in a new mapping (a copy when `copy` gives
    /// the copied data's size and CRC).
    fn vid_header(&mut self, chip: u32, vol: u32, leb: u32, copy: Option<(u32, u32)>) -> VidHeader {
        let sqnum = self.maps[chip as usize].next_sqnum();
        let (data_size, data_crc) = copy.unwrap_or((0, 0));
        VidHeader {
            copy: copy.is_some(),
            compat: if vol == LAYOUT_VOLUME_ID {
                LAYOUT_COMPAT
            } else {
                0
            },
            data_size,
            data_crc,
            ..VidHeader::dynamic(vol, leb, sqnum)
        }
    }

    /// Takes a free PEB of `chip` for `leb` and the commands that prepare it (an erase and
    /// EC header if it is dirty, then the VID header), recording the mapping.
    pub(crate) fn map_fresh(
        &mut self,
        chip: u32,
        vol: u32,
        leb: u32,
        copy: Option<(u32, u32)>,
    ) -> Result<(u32, Vec<Command>), FlashError> {
        let threshold = self.params.wl_threshold;
        let (peb, mut ec, dirty) = self.maps[chip as usize]
            .take_for_new_data(threshold)
            .ok_or_else(|| {
                FlashError::Ubi(format!(
                    "chip {chip} has no free eraseblock left (too many bad blocks)"
                ))
            })?;
        let mut cmds = Vec::with_capacity(3);
        let vid = self.vid_header(chip, vol, leb, copy);
        ec = self.prepare(chip, peb, ec, dirty, &vid, &mut cmds);
        self.maps[chip as usize].map(vol, leb, peb, ec);
        self.maps[chip as usize].protect(peb);
        Ok((peb, cmds))
    }

    /// The commands that give a PEB taken from the pool its VID header: a dirty one is
    /// erased and gets a new EC header first. In a shared layout both headers go in one
    /// program of page 0, so the PEB is erased even if it was clean. Its erase count after.
    fn prepare(
        &mut self,
        chip: u32,
        peb: u32,
        ec: u32,
        dirty: bool,
        vid: &VidHeader,
        cmds: &mut Vec<Command>,
    ) -> u32 {
        if self.layout.shared() {
            cmds.push(Command::Erase {
                addr: BlockAddr::new(chip, peb),
            });
            cmds.push(self.ec_command(chip, peb, ec + 1, Some(vid)));
            return ec + 1;
        }
        let ec = self.reset_if_dirty(chip, peb, ec, dirty, cmds);
        self.counters.header_programs += 1;
        cmds.push(Command::Program {
            addr: PageAddr {
                chip,
                block: peb,
                page: self.layout.vid_page(),
            },
            data: self.layout.vid_page_bytes(vid),
            oob: vec![0xFF; self.chip.oob_size_bytes as usize],
        });
        ec
    }

    /// Readies a PEB taken from the pool for its VID header: a dirty one is erased and gets
    /// a new EC header first. Its erase count after that.
    fn reset_if_dirty(
        &mut self,
        chip: u32,
        peb: u32,
        ec: u32,
        dirty: bool,
        cmds: &mut Vec<Command>,
    ) -> u32 {
        if !dirty {
            return ec;
        }
        cmds.push(Command::Erase {
            addr: BlockAddr::new(chip, peb),
        });
        cmds.push(self.ec_command(chip, peb, ec + 1, None));
        ec + 1
    }

    /// The first `n` data pages of a PEB (data and OOB each), read in one batch; `None` if
    /// one of them could not be read (a power loss is an error).
    fn read_data_pages<F: Flash>(
        &self,
        dev: &mut F,
        chip: u32,
        peb: u32,
        n: u32,
    ) -> Result<Option<Vec<Page>>, FlashError> {
        let reads = (0..n)
            .map(|i| Command::Read {
                addr: PageAddr {
                    chip,
                    block: peb,
                    page: self.layout.data_page() + i,
                },
            })
            .collect();
        let mut pages = Vec::with_capacity(n as usize);
        for c in dev.submit(reads) {
            match c.result {
                Ok(Reply::Read { data, oob, .. }) => pages.push((data, oob)),
                Err(FlashError::PowerLost) => return Err(FlashError::PowerLost),
                _ => return Ok(None),
            }
        }
        Ok(Some(pages))
    }

    /// The programs of `pages` (data and OOB) into the data pages of `peb`, from its first.
    fn data_programs(
        &self,
        chip: u32,
        peb: u32,
        pages: impl IntoIterator<Item = Page>,
    ) -> impl Iterator<Item = Command> {
        let first = self.layout.data_page();
        (first..)
            .zip(pages)
            .map(move |(page, (data, oob))| Command::Program {
                addr: PageAddr {
                    chip,
                    block: peb,
                    page,
                },
                data,
                oob,
            })
    }

    /// A copy's data size and CRC (as its VID header carries them): the pages' data, as
    /// Linux's covers the data only (the OOB is the chip's, not UBI's).
    fn data_crc(pages: &[Page]) -> (u32, u32) {
        let data: Vec<u8> = pages.iter().flat_map(|(d, _)| d.iter().copied()).collect();
        (data.len() as u32, linux_crc32(&data))
    }

    /// Runs a batch of virtual commands: each becomes its physical command(s) on the chip
    /// UBI mapped it to; completions come back in batch order.
    pub fn submit<F: Flash>(&mut self, dev: &mut F, batch: Vec<Command>) -> Vec<Completion> {
        let now = dev.now_ns();
        let mut done: Vec<Option<Completion>> = (0..batch.len()).map(|_| None).collect();
        let mut physical = Vec::with_capacity(batch.len());
        let mut owner: Vec<(usize, Role)> = Vec::with_capacity(batch.len());
        let instant = |result| Completion {
            result,
            start_ns: now,
            end_ns: now,
        };
        for (slot, cmd) in batch.into_iter().enumerate() {
            let outcome = self.plan(cmd, slot, &mut physical, &mut owner);
            match outcome {
                Ok(Some(reply)) => done[slot] = Some(instant(Ok(reply))),
                Ok(None) => {}
                Err(e) => done[slot] = Some(instant(Err(e))),
            }
        }
        let mut background = false;
        let mut foreground_end = now;
        let completions = if physical.is_empty() {
            Vec::new()
        } else {
            dev.submit(physical)
        };
        // Per recycled PEB: its slot, chip, PEB, new erase count and first failure.
        let mut recycled: Vec<(usize, u32, u32, u32, Option<FlashError>)> = Vec::new();
        for (c, (slot, role)) in completions.into_iter().zip(owner) {
            if let Err(FlashError::ChipFailed(chip)) = c.result {
                self.chip_failed(chip);
            }
            match role {
                Role::Recycle { chip, peb, ec } => {
                    background = true;
                    let failed = c.result.err();
                    match recycled.last_mut() {
                        Some(last) if last.1 == chip && last.2 == peb => {
                            if last.4.is_none() {
                                last.4 = failed;
                            }
                        }
                        _ => recycled.push((slot, chip, peb, ec, failed)),
                    }
                    // The caller does not wait for the erase: it returns at once.
                    done[slot].get_or_insert(Completion {
                        result: Ok(Reply::Done),
                        start_ns: now,
                        end_ns: now,
                    });
                }
                Role::Prepare { chip, peb } => {
                    foreground_end = foreground_end.max(c.end_ns);
                    if let Err(e) = c.result {
                        // The data command behind it fails too; the PEB is settled here.
                        if e.is_media_failure() {
                            self.retire(dev, chip, peb);
                        }
                        merge(
                            &mut done[slot],
                            Completion {
                                result: Err(e),
                                ..c
                            },
                        );
                    }
                }
                Role::Data => {
                    foreground_end = foreground_end.max(c.end_ns);
                    merge(&mut done[slot], c);
                }
            }
        }
        for (slot, chip, peb, ec, failed) in recycled {
            match failed {
                None => self.maps[chip as usize].put_free(peb, ec),
                // UBI's business, not the caller's: the PEB is retired, the LEB unmapped.
                Some(e) if e.is_media_failure() => self.retire(dev, chip, peb),
                // A power loss: the PEB is dirty, and the caller must hear of it.
                Some(e) => {
                    self.maps[chip as usize].put_dirty(peb);
                    if let Some(c) = done[slot].as_mut() {
                        c.result = Err(e);
                    }
                }
            }
        }
        // Background work (erases of unmapped PEBs) keeps its chip busy, not the caller.
        if background {
            dev.set_clock_ns(foreground_end.max(now));
        }
        wear_level::run(self, dev);
        done.into_iter()
            .map(|c| c.expect("every slot answered"))
            .collect()
    }

    /// One virtual command's physical commands, or its answer when it needs no flash.
    fn plan(
        &mut self,
        cmd: Command,
        slot: usize,
        physical: &mut Vec<Command>,
        owner: &mut Vec<(usize, Role)>,
    ) -> Result<Option<Reply>, FlashError> {
        let g = self.chip;
        if let Some(why) = &self.worn_out {
            if cmd.changes_state() {
                return Err(FlashError::Ubi(why.clone()));
            }
        }
        let erased = || {
            (
                vec![0xFF; g.page_size_bytes as usize],
                vec![0xFF; g.oob_size_bytes as usize],
            )
        };
        match cmd {
            Command::Read { addr } => match Self::located(self.locate(addr)?) {
                None => {
                    let (data, oob) = erased();
                    Ok(Some(Reply::Read {
                        data,
                        oob,
                        ecc: EccReport::default(),
                    }))
                }
                Some(addr) => {
                    physical.push(Command::Read { addr });
                    owner.push((slot, Role::Data));
                    Ok(None)
                }
            },
            Command::ReadOob { addr } => match Self::located(self.locate(addr)?) {
                None => Ok(Some(Reply::ReadOob {
                    oob: erased().1,
                    ecc: EccReport::default(),
                })),
                Some(addr) => {
                    physical.push(Command::ReadOob { addr });
                    owner.push((slot, Role::Data));
                    Ok(None)
                }
            },
            Command::Program { addr, data, oob } => {
                let at = self.locate(addr)?;
                let (chip, leb, page, _) = at;
                let phys = match Self::located(at) {
                    Some(p) => p,
                    None => {
                        let vol = self.fs_vol.unwrap_or(FS_VOLUME_ID);
                        let (peb, prep) = self.map_fresh(chip, vol, leb, None)?;
                        for c in prep {
                            physical.push(c);
                            owner.push((slot, Role::Prepare { chip, peb }));
                        }
                        PageAddr {
                            chip,
                            block: peb,
                            page,
                        }
                    }
                };
                physical.push(Command::Program {
                    addr: phys,
                    data,
                    oob,
                });
                owner.push((slot, Role::Data));
                Ok(None)
            }
            Command::ProgramSpare { addr, oob } => match Self::located(self.locate(addr)?) {
                None => Err(FlashError::SpareOfErasedPage(addr)),
                Some(addr) => {
                    physical.push(Command::ProgramSpare { addr, oob });
                    owner.push((slot, Role::Data));
                    Ok(None)
                }
            },
            Command::Erase { addr } => {
                self.geometry().check_block(addr)?;
                let mut any = false;
                // Striped, a LEB is the same LEB of every chip; with parity, of one chip.
                let chips = if self.params.parity {
                    if self.is_dead(addr.chip) {
                        return Err(FlashError::ChipFailed(addr.chip));
                    }
                    addr.chip..addr.chip + 1
                } else {
                    0..g.chips
                };
                for chip in chips {
                    if self.is_dead(chip) {
                        continue;
                    }
                    let vol = self.fs_vol.unwrap_or(FS_VOLUME_ID);
                    if let Some(peb) = self.maps[chip as usize].unmap(vol, addr.block) {
                        self.wl_skip.remove(&(chip, peb));
                        let ec = self.maps[chip as usize].pebs[peb as usize].ec + 1;
                        let role = || Role::Recycle { chip, peb, ec };
                        physical.push(Command::Erase {
                            addr: BlockAddr::new(chip, peb),
                        });
                        owner.push((slot, role()));
                        physical.push(self.ec_command(chip, peb, ec, None));
                        owner.push((slot, role()));
                        any = true;
                    }
                }
                // An unmapped LEB is erased already: UBI does nothing.
                Ok((!any).then_some(Reply::Done))
            }
        }
    }

    /// A chip failed whole: nothing is sent to it again. Its map stays as it was, so a
    /// report still shows what it held.
    fn chip_failed(&mut self, chip: u32) {
        if let Some(d) = self.dead.get_mut(chip as usize) {
            *d = true;
        }
    }

    /// Marks a PEB that failed bad on the chip and drops it from the pools.
    fn retire<F: Flash>(&mut self, dev: &mut F, chip: u32, peb: u32) {
        // Several commands on one PEB (an erase and its EC header) may each fail.
        if self.maps[chip as usize].pebs[peb as usize].state == chip_map::PebState::Bad {
            return;
        }
        self.maps[chip as usize].retire(peb);
        self.counters.grown_bad += 1;
        // A failing mark only means the next attach meets a dirty PEB and retires it again.
        let _ = dev.mark_bad(BlockAddr::new(chip, peb));
        self.check_spares(chip);
    }

    /// Goes read-only if `chip` no longer has a good PEB for every LEB of every volume and
    /// one spare.
    fn check_spares(&mut self, chip: u32) {
        if self.is_dead(chip) {
            return;
        }
        let m = &self.maps[chip as usize];
        let bad = m.bad();
        let good = m.pebs.len() as u32 - bad;
        // Every volume's LEBs, the volume table's two, and one spare to map into.
        let need =
            self.volumes.iter().map(|v| v.reserved_pebs).sum::<u32>() + LAYOUT_VOLUME_EBS + 1;
        if good < need && self.worn_out.is_none() {
            self.worn_out = Some(format!(
                "chip {chip} has {bad} bad blocks, past its reserve of {}: UBI is read-only \
                 (copy the data off)",
                m.bad_limit
            ));
        }
    }

    /// Writes again each copy of `chip`'s volume table that is missing or damaged (a chip
    /// put back by a rebuild starts without one).
    pub(crate) fn repair_layout<F: Flash>(
        &mut self,
        dev: &mut F,
        chip: u32,
    ) -> Result<(), FlashError> {
        attach::repair_layout(self, dev, chip)
    }

    /// Changes the wear-levelling threshold of a running UBI (an attach parameter: it is
    /// not on flash).
    pub fn set_wl_threshold(&mut self, threshold: u32) {
        self.params.wl_threshold = threshold.max(1);
    }

    /// Linux's atomic LEB change of LEB `leb` of the file system's volume: on every chip the
    /// new data goes to a fresh PEB whose VID header carries its size and CRC (a copy, as a
    /// wear-levelling move writes it), the LEB switches to it, and only then is the old PEB
    /// erased. A cut before the switch leaves the old data (attach takes the copy only if
    /// its CRC holds). `data` is whole pages of the striped LEB.
    pub fn leb_change<F: Flash>(
        &mut self,
        dev: &mut F,
        leb: u32,
        data: &[u8],
    ) -> Result<(), FlashError> {
        if self.read_only {
            return Err(FlashError::Ubi("attached read-only".into()));
        }
        let page = self.chip.page_size_bytes as usize;
        let chips = self.chip.chips as usize;
        let vol = self.fs_vol.unwrap_or(FS_VOLUME_ID);
        let oob = vec![0xFF; self.chip.oob_size_bytes as usize];
        for chip in 0..chips as u32 {
            if self.is_dead(chip) {
                continue;
            }
            let pages: Vec<Page> = data
                .chunks(page)
                .enumerate()
                .filter(|(i, _)| i % chips == chip as usize)
                .map(|(_, d)| (d.to_vec(), oob.clone()))
                .collect();
            let copy = Self::data_crc(&pages);
            let threshold = self.params.wl_threshold;
            let (dst, ec, dirty) = self.maps[chip as usize]
                .take_for_new_data(threshold)
                .ok_or_else(|| FlashError::Ubi("no free PEB for a LEB change".into()))?;
            let vid = self.vid_header(chip, vol, leb, Some(copy));
            let mut cmds = Vec::new();
            let ec = self.prepare(chip, dst, ec, dirty, &vid, &mut cmds);
            cmds.extend(self.data_programs(chip, dst, pages));
            if let Some(e) = dev.submit(cmds).into_iter().find_map(|c| c.result.err()) {
                self.maps[chip as usize].pebs[dst as usize].ec = ec;
                self.maps[chip as usize].put_dirty(dst);
                return Err(e);
            }
            let m = &mut self.maps[chip as usize];
            let old = m.unmap(vol, leb);
            m.map(vol, leb, dst, ec);
            if let Some(src) = old {
                let src_ec = m.pebs[src as usize].ec + 1;
                let recycle = vec![
                    Command::Erase {
                        addr: BlockAddr::new(chip, src),
                    },
                    self.ec_command(chip, src, src_ec, None),
                ];
                match dev.submit(recycle).into_iter().find_map(|c| c.result.err()) {
                    None => self.maps[chip as usize].put_free(src, src_ec),
                    Some(e) if e.is_media_failure() => self.retire(dev, chip, src),
                    Some(e) => {
                        self.maps[chip as usize].put_dirty(src);
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// The attach options this UBI runs with.
    pub fn attach_options(&self) -> AttachOptions {
        AttachOptions {
            wl_threshold: self.params.wl_threshold,
            volume: self.chosen_volume,
        }
    }

    /// Why UBI refuses writes, if it does.
    pub fn worn_out(&self) -> Option<&str> {
        self.worn_out.as_deref()
    }
}

/// Folds one physical completion into its slot's: the first error wins, times span both,
/// and the data command's reply is the answer.
fn merge(slot: &mut Option<Completion>, c: Completion) {
    *slot = Some(match slot.take() {
        None => c,
        Some(prev) => Completion {
            result: match (prev.result, c.result) {
                (Err(e), _) | (_, Err(e)) => Err(e),
                (Ok(_), Ok(r)) => Ok(r),
            },
            start_ns: prev.start_ns.min(c.start_ns),
            end_ns: prev.end_ns.max(c.end_ns),
        },
    });
}
