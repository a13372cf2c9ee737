// SPDX-License-Identifier: GPL-2.0

//! Kernel APIs the 7.3 `kernel` crate lacks, or offers only as `unsafe`,
//! wrapped for this driver. Upstream they would live in `kernel::cpu`,
//! `kernel::sync::barrier` and `kernel::pci`.

use crate::bindings as b;
use core::marker::PhantomData;
use kernel::{
    device::{Bound, Core},
    dma::{Device as _, DmaMask},
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

/// A PCI driver whose device has its DMA masks set before the driver's
/// probe runs. Registered through [`DmaMasked`], which implements
/// [`pci::Driver`] for it.
pub(crate) trait MaskedPciDriver {
    /// See [`pci::Driver::IdInfo`].
    type IdInfo: 'static;
    /// See [`pci::Driver::Data`].
    type Data<'bound>: Send + 'bound;
    /// See [`pci::Driver::ID_TABLE`].
    const ID_TABLE: pci::IdTable<Self::IdInfo>;
    /// How many bits of DMA address the device drives: the streaming and
    /// coherent masks of the device are set to this before [`Self::probe`].
    const DMA_MASK_BITS: u32;

    /// See [`pci::Driver::probe`]; the DMA masks are set.
    fn probe<'bound>(
        dev: &'bound pci::Device<Core<'_>>,
        id_info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound;
}

/// The [`pci::Driver`] of a [`MaskedPciDriver`] `T`: sets the DMA masks,
/// then calls `T`'s probe.
///
/// `dma_set_mask_and_coherent()` must not run concurrently with DMA
/// allocations or mappings of the device; here it runs before any code of
/// the driver for this binding (and the previous binding's allocations went
/// with its remove), so none can exist yet. The driver therefore needs no
/// unsafe call of its own.
pub(crate) struct DmaMasked<T>(PhantomData<T>);

impl<T: MaskedPciDriver> pci::Driver for DmaMasked<T> {
    type IdInfo = T::IdInfo;
    type Data<'bound> = T::Data<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = T::ID_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        id_info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let masked = DmaMask::try_new(T::DMA_MASK_BITS).and_then(|mask| {
            // SAFETY: no DMA allocation or mapping of `pdev` exists or is
            // made concurrently: the driver's probe has not run yet (see the
            // type's documentation) and holds the device lock (`Core`).
            unsafe { pdev.dma_set_mask_and_coherent(mask) }
        });
        if let Err(e) = masked {
            dev_err!(
                pdev,
                "probe failed: set {}-bit DMA mask (error {})\n",
                T::DMA_MASK_BITS,
                e.to_errno()
            );
        }
        // The driver's probe runs (when called) only with the masks set.
        let init = masked.map(|()| T::probe(pdev, id_info));
        // SAFETY: the closure initialises `slot` exactly when the driver's
        // initialiser does, and returns its result; on `Err` the slot is
        // left uninitialised (the driver's initialiser cleaned up).
        unsafe {
            pin_init::pin_init_from_closure(move |slot| match init {
                Ok(init) => init.__init(slot),
                Err(e) => Err(e),
            })
        }
    }
}
