// SPDX-License-Identifier: GPL-2.0

//! Kernel APIs the 7.3 `kernel` crate lacks, or offers only as `unsafe`,
//! wrapped for this driver. Upstream they would live in `kernel::cpu`,
//! `kernel::sync::barrier` and `kernel::pci`.

use crate::bindings as b;
use kernel::{
    device::Bound,
    irq::{self, Handler},
    pci,
    prelude::*,
};

/// The number of online CPUs (`num_online_cpus()`).
pub(crate) fn num_online_cpus() -> u32 {
    // SAFETY: the helper only reads the online CPU count.
    unsafe { b::ferroce_num_online_cpus() }
}

/// Read barrier for memory shared with a device (`dma_rmb()`): reads after
/// it see data the device wrote before the flag read before it.
pub(crate) fn dma_rmb() {
    // SAFETY: a barrier has no preconditions.
    unsafe { b::ferroce_dma_rmb() }
}

/// Write barrier for memory shared with a device (`dma_wmb()`): the
/// device sees writes before it before writes after it.
pub(crate) fn dma_wmb() {
    // SAFETY: a barrier has no preconditions.
    unsafe { b::ferroce_dma_wmb() }
}

/// MSI-X vectors of a PCI function together with one handler per vector.
///
/// Uses the kernel's IRQ vector API (`pci::Device::alloc_irq_vectors`,
/// `irq::Registration`). The registrations borrow the vector allocation,
/// which this type owns too; they are freed first.
///
/// # Invariants
///
/// * `vectors` points to the allocation owned by this object (from
///   `KBox::into_raw`), freed in `drop` after every registration.
/// * `regs` hold registrations of vectors of `vectors`.
/// * `hinted` holds the IRQ numbers of registrations in `regs` that have an
///   affinity hint set.
pub(crate) struct MsixIrqs<'a, H: Handler + 'static> {
    regs: KVec<Pin<KBox<irq::Registration<'a, H>>>>,
    hinted: KVec<u32>,
    vectors: *mut pci::IrqVectorRegistration<'a>,
}

// SAFETY: the vector allocation and the registrations may be dropped from any
// thread; handlers are `Sync`.
unsafe impl<H: Handler + 'static> Send for MsixIrqs<'_, H> {}
// SAFETY: `&MsixIrqs` only gives shared access to `Sync` handlers.
unsafe impl<H: Handler + 'static> Sync for MsixIrqs<'_, H> {}

impl<'a, H: Handler + 'static> MsixIrqs<'a, H> {
    /// Allocates between `min` and `max` MSI-X vectors and requests each
    /// vector `i` with the handler `handler(i)`. Vectors from `spread_from`
    /// on get one CPU each as affinity and hint (the `i - spread_from`-th
    /// CPU of `cpumask_local_spread`), e.g. completion vectors after an
    /// async one; best effort, a failure is only logged.
    pub(crate) fn new(
        pdev: &'a pci::Device<Bound>,
        min: u32,
        max: u32,
        spread_from: usize,
        name: &'static CStr,
        mut handler: impl FnMut(usize) -> H,
    ) -> Result<Self> {
        let msix = pci::IrqTypes::default().with(pci::IrqType::MsiX);
        let vectors = KBox::new(pdev.alloc_irq_vectors(min, max, msix)?, GFP_KERNEL)?;
        let n = vectors.len();
        // INVARIANT: `vectors` comes from `KBox::into_raw`; no registration yet.
        let mut this = Self {
            regs: KVec::with_capacity(n, GFP_KERNEL)?,
            hinted: KVec::with_capacity(n, GFP_KERNEL)?,
            vectors: KBox::into_raw(vectors),
        };
        for i in 0..n {
            // SAFETY: `this.vectors` stays allocated until `drop` has freed
            // every registration, so borrowing it for `'a` is sound as long
            // as only the registrations in `this.regs` hold the borrow.
            let vectors: &'a pci::IrqVectorRegistration<'a> = unsafe { &*this.vectors };
            let request = irq::IrqRequest::from(vectors.index(i)?);
            let irq_num = request.irq();
            // SAFETY: the registration is kept in a pinned box that is only
            // dropped (never forgotten) by `MsixIrqs::drop`.
            let init = unsafe {
                irq::Registration::new(
                    request,
                    irq::Flags::TRIGGER_NONE,
                    name,
                    Ok::<_, Error>(handler(i)),
                )
            };
            let reg = KBox::pin_init(init, GFP_KERNEL)?;
            this.regs.push(reg, GFP_KERNEL)?;
            if let Some(cpu_index) = i.checked_sub(spread_from) {
                let cpu_index = u32::try_from(cpu_index)?;
                // SAFETY: `irq_num` is the IRQ of a vector we requested just
                // above; the hint is cleared before the IRQ is freed (`drop`).
                let ret = unsafe { b::ferroce_irq_set_spread_hint(irq_num, cpu_index) };
                if ret == 0 {
                    // INVARIANT: the registration is in `regs`.
                    this.hinted.push(irq_num, GFP_KERNEL)?;
                } else {
                    dev_warn!(
                        pdev.as_ref(),
                        "no affinity for vector {} (IRQ {}): error {}\n",
                        i,
                        irq_num,
                        ret
                    );
                }
            }
        }
        Ok(this)
    }

    /// The number of vectors (and handlers).
    pub(crate) fn len(&self) -> usize {
        self.regs.len()
    }

    /// Waits until no handler runs.
    pub(crate) fn synchronize(&self) {
        for r in self.regs.iter() {
            r.synchronize();
        }
    }
}

impl<H: Handler + 'static> Drop for MsixIrqs<'_, H> {
    fn drop(&mut self) {
        // Clear the affinity hints (free_irq() warns about a set one), free
        // the IRQs (this waits for running handlers), then the vectors.
        for &irq_num in self.hinted.iter() {
            // SAFETY: the IRQ is still requested (type invariant).
            unsafe { b::ferroce_irq_clear_hint(irq_num) };
        }
        self.hinted.clear();
        self.regs.clear();
        // SAFETY: `vectors` came from `KBox::into_raw` and no registration
        // borrows it any more (type invariant).
        drop(unsafe { KBox::from_raw(self.vectors) });
    }
}

/// Sets the streaming and coherent DMA masks of `pdev` to `bits` bits.
///
/// Takes the `Core` context: only probe (or remove) holds it, and the driver
/// allocates no DMA memory of this device concurrently with its own probe.
pub(crate) fn dma_set_mask_and_coherent(
    pdev: &pci::Device<kernel::device::Core<'_>>,
    bits: u32,
) -> Result {
    use kernel::dma::Device as _;
    let mask = kernel::dma::DmaMask::try_new(bits)?;
    // SAFETY: called from probe with the device lock held (`Core`), before
    // this driver made any DMA allocation or mapping for the device.
    unsafe { pdev.dma_set_mask_and_coherent(mask) }
}
