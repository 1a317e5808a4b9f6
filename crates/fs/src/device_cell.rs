//! The flash device as the file system holds it.
//!
//! Everything that changes the file system runs with `&mut FileSystem` and reaches the
//! device through [`DeviceCell::get_mut`], which takes no lock. Reads of file data run with
//! `&FileSystem` (several at once, under a reader-writer lock above), and a device operation
//! needs `&mut` of the device even to read (clocks, counters, read disturb), so they take
//! the device for the one submit through [`DeviceCell::lock`]. The lock is held only for a
//! device call, never across file system logic, so it cannot be taken twice by one thread.

use std::sync::{Mutex, MutexGuard, PoisonError};

pub(crate) struct DeviceCell<F>(Mutex<F>);

impl<F> DeviceCell<F> {
    pub fn new(dev: F) -> Self {
        Self(Mutex::new(dev))
    }

    /// The device, for a caller that owns the file system exclusively.
    pub fn get_mut(&mut self) -> &mut F {
        // A panic inside a device call cannot leave the simulator's state half-built in a
        // way a later call trips over (each operation commits at its end), so a poisoned
        // lock is taken as it is.
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    /// The device, for a shared reader: hold the guard for one device call only.
    pub fn lock(&self) -> MutexGuard<'_, F> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn into_inner(self) -> F {
        self.0.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}
