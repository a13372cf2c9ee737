// SPDX-License-Identifier: GPL-2.0

//! Kernel APIs the 7.3 `kernel` crate lacks, or offers only as `unsafe`,
//! wrapped for this driver. In tree they are `kernel::cpu`'s and
//! `kernel::pci`'s: `make series` turns this file into two patches of their
//! own (rust/kernel/cpu.rs and rust/kernel/pci/msix.rs), and the driver's
//! paths into it into paths into those modules.

use crate::bindings as b;
use core::marker::{
    PhantomData,
    PhantomPinned, //
};
use kernel::{
    device::{
        Bound,
        Core, //
    },
    dma::{
        Device as _,
        DmaMask, //
    },
    irq::{
        self,
        Handler, //
    },
    pci,
    prelude::*,
    str::CString, //
};

/// The number of online CPUs (`num_online_cpus()`).
pub fn num_online_cpus() -> u32 {
    // SAFETY: the helper only reads the online CPU count.
    unsafe { b::num_online_cpus() }
}

/// The handler registration of one MSI-X vector, with its affinity hint
/// and its name.
///
/// # Invariants
///
/// * `hinted` is true only if an affinity hint is set on the IRQ of `reg`.
/// * `reg` was requested with `name` as its name, which the IRQ core keeps
///   (a pointer into `name`'s heap buffer) until `reg` frees the IRQ;
///   `reg` is declared before `name`, so it is dropped first.
#[pin_data(PinnedDrop)]
struct Vector<'a, H: Handler + 'static> {
    #[pin]
    reg: irq::Registration<'a, H>,
    irq_num: u32,
    hinted: bool,
    name: CString,
}

#[pinned_drop]
impl<H: Handler + 'static> PinnedDrop for Vector<'_, H> {
    fn drop(self: Pin<&mut Self>) {
        // Runs before `reg` is dropped: free_irq() warns about a set hint.
        if self.hinted {
            // SAFETY: the IRQ is still requested (`reg` is alive).
            unsafe { b::irq_update_affinity_hint(self.irq_num, core::ptr::null()) };
        }
    }
}

/// MSI-X vectors of a PCI function together with one handler per vector.
///
/// Uses the kernel's IRQ vector API (`pci::Device::alloc_irq_vectors`,
/// `irq::Registration`). The registrations borrow the vector allocation,
/// which this pinned object owns too: each vector's hint is cleared, then
/// its IRQ freed, and the vectors are freed last.
///
/// # Invariants
///
/// * The registrations in `regs` borrow `vectors` (a field of this pinned,
///   `!Unpin` object, so it does not move), and are never handed out with a
///   lifetime longer than a borrow of `self`.
/// * `regs` is declared before `vectors`, so it is dropped first.
#[pin_data]
pub struct MsixIrqs<'a, H: Handler + 'static> {
    regs: KVec<Pin<KBox<Vector<'a, H>>>>,
    vectors: pci::IrqVectorRegistration<'a>,
    #[pin]
    _pin: PhantomPinned,
}

impl<'a, H: Handler + 'static> MsixIrqs<'a, H> {
    /// Allocates between `min` and `max` MSI-X vectors and requests each
    /// vector `i` with the handler `handler(i)`, named `name(i)` (the name
    /// `/proc/interrupts` shows, kept with the vector until its IRQ is
    /// freed, so it can name the device too). Vectors from `spread_from`
    /// on get one CPU each as affinity and hint (the `i - spread_from`-th
    /// CPU of `cpumask_local_spread` for the device's NUMA node), e.g.
    /// completion vectors after an async one; best effort, a failure is
    /// only logged.
    pub fn new(
        pdev: &'a pci::Device<Bound>,
        min: u32,
        max: u32,
        spread_from: usize,
        name: impl Fn(usize) -> Result<CString> + 'a,
        mut handler: impl FnMut(usize) -> H + 'a,
    ) -> impl PinInit<Self, Error> + 'a {
        let msix = pci::IrqTypes::default().with(pci::IrqType::MsiX);
        // Fields are initialised in this order; if a later step fails,
        // `regs` (the IRQs registered so far) is dropped before `vectors`.
        try_pin_init!(&this in Self {
            vectors: pdev.alloc_irq_vectors(min, max, msix)?,
            regs: KVec::new(),
            _pin: PhantomPinned,
            _: {
                let this = this.as_ptr();
                // SAFETY: `vectors` and `regs` are initialised; `this` is
                // pinned, so `vectors` stays at this address until the
                // object is dropped, which drops `regs` first (invariant),
                // as does a failure of this initialiser. The registrations,
                // the only holders of the stretched borrow, live in `regs`.
                let (vectors, regs): (&'a pci::IrqVectorRegistration<'a>, _) =
                    unsafe { (&(*this).vectors, &mut (*this).regs) };
                let n = vectors.len();
                regs.reserve(n, GFP_KERNEL)?;
                for i in 0..n {
                    let request = irq::IrqRequest::from(vectors.index(i)?);
                    let irq_num = request.irq();
                    let vector_name = name(i)?;
                    // SAFETY: the string lives in `vector_name`'s heap
                    // buffer, which does not move when the `CString` moves
                    // into the `Vector` below and is not changed while it
                    // is there. The `Vector` drops its registration (which
                    // frees the IRQ, the only user of the name) before the
                    // name (type invariant); if the `Vector` is not built,
                    // no IRQ was requested with the name.
                    let irq_name: &'static CStr =
                        unsafe { &*core::ptr::from_ref::<CStr>(&vector_name) };
                    // SAFETY: the registration is kept in a pinned box that
                    // is only dropped (never forgotten), with `regs`.
                    let reg = unsafe {
                        irq::Registration::new(
                            request,
                            irq::Flags::TRIGGER_NONE,
                            irq_name,
                            Ok::<_, Error>(handler(i)),
                        )
                    };
                    // INVARIANT: `reg` is requested with `vector_name`'s
                    // string, and the `Vector` keeps it.
                    let vector = KBox::pin_init(
                        try_pin_init!(Vector {
                            reg <- reg,
                            irq_num,
                            hinted: false,
                            name: vector_name,
                        }? Error),
                        GFP_KERNEL,
                    )?;
                    regs.push(vector, GFP_KERNEL)?;
                    let Some(cpu_index) = i.checked_sub(spread_from) else {
                        continue;
                    };
                    let cpu_index = u32::try_from(cpu_index)?;
                    let dev = core::ptr::from_ref::<kernel::device::Device<Bound>>(pdev.as_ref())
                        .cast::<kernel::bindings::device>()
                        .cast_mut();
                    // SAFETY: `kernel::device::Device` is a transparent
                    // wrapper of `struct device`, so `dev` is the bound PCI
                    // device, alive during the call (only read); `irq_num`
                    // is the IRQ of a vector requested just above;
                    // `Vector`'s drop clears the hint before the IRQ is
                    // freed.
                    // Pinned to the `cpu_index`-th CPU of the spread local to
                    // the device's NUMA node, as affinity and hint.
                    let ret = unsafe {
                        let cpu = kernel::bindings::cpumask_local_spread(
                            cpu_index,
                            b::dev_to_node(dev),
                        );
                        b::irq_set_affinity_and_hint(irq_num, b::cpumask_of(cpu))
                    };
                    if ret == 0 {
                        if let Some(vector) = regs.last_mut() {
                            // INVARIANT: the hint was set just above.
                            *vector.as_mut().project().hinted = true;
                        }
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
            },
        }? Error)
    }

    /// The number of vectors (and handlers).
    pub fn len(&self) -> usize {
        self.regs.len()
    }

    /// Whether there are no vectors (a request for at least one vector
    /// never gives that).
    pub fn is_empty(&self) -> bool {
        self.regs.is_empty()
    }

    /// Waits until no handler runs.
    pub fn synchronize(&self) {
        for v in self.regs.iter() {
            v.reg.synchronize();
        }
    }
}

/// A PCI driver whose device has its DMA masks set before the driver's
/// probe runs. Registered through [`DmaMasked`], which implements
/// [`pci::Driver`] for it.
pub trait MaskedPciDriver {
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
pub struct DmaMasked<T>(PhantomData<T>);

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
