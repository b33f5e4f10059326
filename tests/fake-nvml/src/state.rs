//! The library's process-wide state: init refcount, the loaded fixture (re-read when the
//! file changes) and the cost model it runs under, device handles (GPU and MIG) and event
//! sets. (GPM samples live in [`crate::gpm`].)
//!
//! One `Mutex` guards it (the MIG handle slots have their own, taken only by calls that
//! hand out or take a MIG handle), and it is **never held while a call sleeps or pays its
//! cost** (`hang_ms`, [`crate::costs`]): a call takes a snapshot (`Arc<Fixture>`) under the
//! lock, releases it, then sleeps and answers from the snapshot, so a hung or slow GPU does
//! not hold up the others.
//!
//! With [`crate::RECHECK_ENV`] set, each thread keeps its last snapshot (fixture and cost
//! model) for that long, unless the fixture was reloaded or replaced since: a call then
//! takes no lock at all. A real driver's calls on different GPUs do not queue behind one
//! lock of the fake's making, and the cost model prices the driver, not the fake; without
//! this, eight threads calling at once spent a fifth of their CPU time on the fake's lock.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use nvml_wrapper_sys::bindings::{
    nvmlDevice_st, nvmlDevice_t, nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED as DRIVER_NOT_LOADED,
    nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST as GPU_IS_LOST,
    nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT as INVALID_ARGUMENT,
    nvmlReturn_enum_NVML_ERROR_UNINITIALIZED as UNINITIALIZED,
    nvmlReturn_enum_NVML_ERROR_UNKNOWN as UNKNOWN, nvmlReturn_t,
};

use crate::costs::{self, Model};
use crate::fixture::{Fixture, Gpu, Mig, MigDevice};
use crate::{FIXTURE_ENV, MAX_GPUS};

/// An NVML return code other than success.
pub(crate) type Ret = nvmlReturn_t;

/// Identity of the fixture file as last read: a change to any part triggers a re-read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileKey {
    path: PathBuf,
    dev: u64,
    ino: u64,
    len: u64,
    mtime: Option<SystemTime>,
}

/// What one event set has asked for and been given.
#[derive(Debug, Default)]
pub(crate) struct EventSet {
    /// Event type mask registered per GPU index.
    pub registered: BTreeMap<usize, u64>,
    /// XID events already delivered: (GPU index, position in its `xid_events`).
    pub delivered: HashSet<(usize, usize)>,
}

/// A fixture as last read, and the costs it runs under (`None`: calls are free).
struct Loaded {
    key: FileKey,
    /// When the file was last checked for a change.
    checked: Instant,
    fixture: Arc<Fixture>,
    costs: Option<Arc<Model>>,
}

#[derive(Default)]
struct State {
    init_count: u32,
    /// Set by `railscopeFakeNvmlSetFixture`; wins over the environment variable.
    override_path: Option<PathBuf>,
    /// How long a check of the fixture file holds (`None`: not yet read from the
    /// environment; zero: every call checks).
    recheck: Option<Duration>,
    loaded: Option<Loaded>,
    /// The last load error printed, so a broken file is reported once, not per call.
    last_error: Option<String>,
    /// Event sets by address; the `Box` gives each a unique, stable address.
    event_sets: BTreeMap<usize, (Box<u8>, EventSet)>,
}

static STATE: Mutex<State> = Mutex::new(State {
    init_count: 0,
    override_path: None,
    recheck: None,
    loaded: None,
    last_error: None,
    event_sets: BTreeMap::new(),
});

/// Bumped whenever the loaded fixture or its source changes: a thread's kept snapshot from
/// an older generation is stale.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// `State::init_count`, readable without the lock.
static INITS: AtomicU32 = AtomicU32::new(0);

/// A thread's last snapshot, for [`RECHECK_ENV`](crate::RECHECK_ENV)'s time.
struct Kept {
    generation: u64,
    taken: Instant,
    recheck: Duration,
    fixture: Arc<Fixture>,
    costs: Option<Arc<Model>>,
}

thread_local! {
    static KEPT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// The fixture and cost model for a call: this thread's kept snapshot while it holds,
/// else from the state (re-reading a changed file). `UNINITIALIZED` before `nvmlInit`.
fn current() -> Result<(Arc<Fixture>, Option<Arc<Model>>), Ret> {
    if INITS.load(Ordering::Acquire) == 0 {
        return Err(UNINITIALIZED);
    }
    let generation = GENERATION.load(Ordering::Acquire);
    let kept = KEPT.with(|k| {
        k.borrow().as_ref().and_then(|k| {
            (k.generation == generation && k.taken.elapsed() < k.recheck)
                .then(|| (k.fixture.clone(), k.costs.clone()))
        })
    });
    if let Some(kept) = kept {
        return Ok(kept);
    }
    let mut state = lock();
    if state.init_count == 0 {
        return Err(UNINITIALIZED);
    }
    let fixture = refresh(&mut state)?;
    let costs = state.loaded.as_ref().and_then(|l| l.costs.clone());
    let recheck = state.recheck.unwrap_or_default();
    if !recheck.is_zero() {
        let kept = Kept {
            generation: GENERATION.load(Ordering::Acquire),
            taken: Instant::now(),
            recheck,
            fixture: fixture.clone(),
            costs: costs.clone(),
        };
        drop(state);
        KEPT.with(|k| *k.borrow_mut() = Some(kept));
    }
    Ok((fixture, costs))
}

/// Device handles are addresses inside this array (`&HANDLES[i]`): unique, stable across
/// fixture reloads, range-checkable, and never dereferenced by anyone.
static HANDLES: [u8; MAX_GPUS] = [0; MAX_GPUS];

fn lock() -> MutexGuard<'static, State> {
    // A panic inside a call is already turned into NVML_ERROR_UNKNOWN; the state it left
    // is still consistent (every update is a single assignment), so poisoning is ignored.
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn fixture_path(state: &State) -> Option<PathBuf> {
    state
        .override_path
        .clone()
        .or_else(|| std::env::var_os(FIXTURE_ENV).map(PathBuf::from))
}

/// [`crate::RECHECK_ENV`]: milliseconds a check of the fixture file holds; unset, zero or
/// unreadable: every call checks.
fn recheck_from_env() -> Duration {
    std::env::var(crate::RECHECK_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::ZERO, Duration::from_millis)
}

/// The fixture as last loaded, if any.
fn previous(state: &State) -> Result<Arc<Fixture>, Ret> {
    state
        .loaded
        .as_ref()
        .map(|l| l.fixture.clone())
        .ok_or(UNKNOWN)
}

/// Reads, validates and prices a fixture file (the cost model depends on the environment
/// as it is now).
fn load(path: &Path) -> Result<(Fixture, Option<Model>), String> {
    let fixture = Fixture::load(path).map_err(|e| e.to_string())?;
    let costs =
        Model::for_fixture(&fixture).map_err(|e| format!("fixture {}: {e}", path.display()))?;
    Ok((fixture, costs))
}

/// Re-reads the fixture if its file changed. A file that fails to load keeps the previous
/// fixture (a writer caught mid-write) and is reported on stderr once.
fn refresh(state: &mut State) -> Result<Arc<Fixture>, Ret> {
    let recheck = *state.recheck.get_or_insert_with(recheck_from_env);
    if let Some(loaded) = &state.loaded
        && !recheck.is_zero()
        && loaded.checked.elapsed() < recheck
    {
        return Ok(loaded.fixture.clone());
    }
    let Some(path) = fixture_path(state) else {
        report(
            state,
            format!("no fixture: set {FIXTURE_ENV} to a fixture file"),
        );
        return Err(DRIVER_NOT_LOADED);
    };
    let key = match std::fs::metadata(&path) {
        Ok(m) => FileKey {
            path: path.clone(),
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: m.modified().ok(),
        },
        Err(e) => {
            report(
                state,
                format!("failed to read fixture {}: {e}", path.display()),
            );
            return previous(state);
        }
    };
    if let Some(loaded) = &mut state.loaded
        && loaded.key == key
    {
        loaded.checked = Instant::now();
        return Ok(loaded.fixture.clone());
    }
    match load(&path) {
        Ok((fixture, costs)) => {
            let fixture = Arc::new(fixture);
            GENERATION.fetch_add(1, Ordering::AcqRel);
            state.loaded = Some(Loaded {
                key,
                checked: Instant::now(),
                fixture: fixture.clone(),
                costs: costs.map(Arc::new),
            });
            state.last_error = None;
            Ok(fixture)
        }
        Err(e) => {
            report(state, e);
            previous(state)
        }
    }
}

fn report(state: &mut State, message: String) {
    if state.last_error.as_deref() != Some(message.as_str()) {
        eprintln!("railscope-fake-nvml: {message}");
        state.last_error = Some(message);
    }
}

/// Sets the fixture file of this loaded copy of the library (`None`: back to the
/// environment variable).
pub(crate) fn set_override(path: Option<PathBuf>) {
    let mut state = lock();
    state.override_path = path;
    state.loaded = None;
    GENERATION.fetch_add(1, Ordering::AcqRel);
    state.last_error = None;
}

/// `nvmlInit*` (named `call`): loads the fixture and counts the init.
pub(crate) fn init(call: &'static str) -> Result<(), Ret> {
    let fixture = {
        let mut state = lock();
        refresh(&mut state)?
    };
    sleep_ms(fixture.hang_ms);
    if let Some(code) = fixture.init_error {
        return Err(code);
    }
    {
        let mut state = lock();
        state.init_count = state.init_count.saturating_add(1);
        INITS.store(state.init_count, Ordering::Release);
    }
    pay(call);
    Ok(())
}

/// `nvmlShutdown`: one init fewer; `UNINITIALIZED` when there was none.
pub(crate) fn shutdown() -> Result<(), Ret> {
    {
        let mut state = lock();
        if state.init_count == 0 {
            return Err(UNINITIALIZED);
        }
        state.init_count -= 1;
        INITS.store(state.init_count, Ordering::Release);
    }
    pay("nvmlShutdown");
    Ok(())
}

/// Pays `call`'s cost under the loaded fixture's model, without holding the lock.
pub(crate) fn pay(call: &'static str) {
    let model = costs_now();
    costs::pay(model.as_deref(), call);
}

/// Pays for reading these field ids (`nvmlDeviceGetFieldValues`, on top of its own cost).
pub(crate) fn pay_fields(ids: impl IntoIterator<Item = u32>) {
    if let Some(model) = costs_now() {
        costs::spend(model.fields(ids));
    }
}

fn costs_now() -> Option<Arc<Model>> {
    match current() {
        Ok((_, costs)) => costs,
        // Before init or with no fixture: what was last loaded, if anything.
        Err(_) => lock().loaded.as_ref().and_then(|l| l.costs.clone()),
    }
}

/// The current fixture for a call: checks init, re-reads a changed file, then sleeps the
/// fixture's global `hang_ms` (with the lock released).
pub(crate) fn snapshot() -> Result<Arc<Fixture>, Ret> {
    let (fixture, _) = current()?;
    sleep_ms(fixture.hang_ms);
    Ok(fixture)
}

/// How often a waiting call looks at the fixture again: every 10 ms, or as long as a check
/// of the file holds ([`crate::RECHECK_ENV`]) when that is longer.
pub(crate) fn poll_interval() -> Duration {
    let recheck = *lock().recheck.get_or_insert_with(recheck_from_env);
    recheck.max(Duration::from_millis(10))
}

/// Sleeps `ms` milliseconds (the fake's model of a wedged driver).
pub(crate) fn sleep_ms(ms: u64) {
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// The handle of GPU `index`.
pub(crate) fn handle(index: usize) -> nvmlDevice_t {
    HANDLES
        .as_ptr()
        .wrapping_add(index)
        .cast::<nvmlDevice_st>()
        .cast_mut()
}

/// The GPU index of a handle, `INVALID_ARGUMENT` for null, foreign or stale handles.
pub(crate) fn index_of(device: nvmlDevice_t, fixture: &Fixture) -> Result<usize, Ret> {
    let offset = (device as usize).wrapping_sub(HANDLES.as_ptr() as usize);
    if device.is_null() || offset >= MAX_GPUS || offset >= fixture.gpus.len() {
        return Err(INVALID_ARGUMENT);
    }
    Ok(offset)
}

/// MIG handle slots per GPU: twice the most MIG devices a GPU may list, so a slot is given
/// to a new MIG device only once its previous one has left the fixture, and rarely even then.
const MIG_SLOTS: usize = 2 * Mig::MAX_DEVICES as usize;

/// MIG device handles are addresses inside this array (`&MIG_HANDLES[gpu * MIG_SLOTS +
/// slot]`): distinct from every GPU handle (which [`index_of`] alone accepts), stable, and
/// never dereferenced.
static MIG_HANDLES: [u8; MAX_GPUS * MIG_SLOTS] = [0; MAX_GPUS * MIG_SLOTS];

/// Which MIG device (by UUID) each handed-out MIG handle slot stands for, by offset into
/// [`MIG_HANDLES`]. A handle whose UUID has left the fixture is stale. Its own lock: only
/// MIG calls take it.
static MIG_SLOT_UUIDS: Mutex<BTreeMap<usize, String>> = Mutex::new(BTreeMap::new());

fn mig_slots() -> MutexGuard<'static, BTreeMap<usize, String>> {
    MIG_SLOT_UUIDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The handle of MIG device `uuid` of GPU `gpu`: the slot it had before, else a free one,
/// else one whose device has left `devices` (the GPU's MIG devices now).
pub(crate) fn mig_handle(
    gpu: usize,
    uuid: &str,
    devices: &[MigDevice],
) -> Result<nvmlDevice_t, Ret> {
    if gpu >= MAX_GPUS {
        return Err(INVALID_ARGUMENT);
    }
    let range = gpu * MIG_SLOTS..(gpu + 1) * MIG_SLOTS;
    let mut slots = mig_slots();
    let known = range
        .clone()
        .find(|o| slots.get(o).is_some_and(|u| u == uuid));
    let offset = known
        .or_else(|| range.clone().find(|o| !slots.contains_key(o)))
        .or_else(|| {
            range.clone().find(|o| {
                slots
                    .get(o)
                    .is_none_or(|u| devices.iter().all(|d| d.uuid != *u))
            })
        })
        .ok_or(UNKNOWN)?;
    slots.insert(offset, uuid.to_owned());
    Ok(MIG_HANDLES
        .as_ptr()
        .wrapping_add(offset)
        .cast::<nvmlDevice_st>()
        .cast_mut())
}

/// What a device handle stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// GPU `index`.
    Gpu(usize),
    /// MIG device `device` (position in `mig.devices`) of GPU `gpu`.
    Mig { gpu: usize, device: usize },
}

/// A GPU or MIG handle resolved against `fixture`; `INVALID_ARGUMENT` for null, foreign
/// and stale handles (a MIG handle whose device has left the fixture is stale).
pub(crate) fn target_of(device: nvmlDevice_t, fixture: &Fixture) -> Result<Target, Ret> {
    if let Ok(index) = index_of(device, fixture) {
        return Ok(Target::Gpu(index));
    }
    let offset = (device as usize).wrapping_sub(MIG_HANDLES.as_ptr() as usize);
    if device.is_null() || offset >= MIG_HANDLES.len() {
        return Err(INVALID_ARGUMENT);
    }
    let gpu = offset / MIG_SLOTS;
    let devices = fixture
        .gpus
        .get(gpu)
        .and_then(|g| g.mig.as_ref())
        .map_or(&[][..], |m| &m.devices[..]);
    let slots = mig_slots();
    let uuid = slots.get(&offset).ok_or(INVALID_ARGUMENT)?;
    let position = devices
        .iter()
        .position(|d| d.uuid == *uuid)
        .ok_or(INVALID_ARGUMENT)?;
    Ok(Target::Mig {
        gpu,
        device: position,
    })
}

/// A device a call is about: a GPU, or a MIG device with its parent GPU.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Device<'a> {
    /// A whole GPU.
    Gpu(&'a Gpu),
    /// A MIG device and the GPU it is part of (with that GPU's index).
    Mig {
        parent: &'a Gpu,
        parent_index: usize,
        mig: &'a MigDevice,
    },
}

impl<'a> Device<'a> {
    /// The physical GPU: itself, or a MIG device's parent (whose `not_supported` and
    /// `errors` apply to its MIG devices too).
    pub(crate) fn gpu(&self) -> &'a Gpu {
        match self {
            Self::Gpu(g) => g,
            Self::Mig { parent, .. } => parent,
        }
    }
}

/// [`with_gpu`] for the calls that also take a MIG device handle: a MIG device hangs,
/// is lost and pays like its parent GPU.
pub(crate) fn with_device<T>(
    call: &'static str,
    device: nvmlDevice_t,
    f: impl FnOnce(Device<'_>, &Fixture) -> Result<T, Ret>,
) -> Result<T, Ret> {
    let (fixture, costs) = current()?;
    sleep_ms(fixture.hang_ms);
    let target = target_of(device, &fixture)?;
    let dev = match target {
        Target::Gpu(i) => Device::Gpu(&fixture.gpus[i]),
        Target::Mig { gpu, device } => {
            let parent = &fixture.gpus[gpu];
            let mig = parent
                .mig
                .as_ref()
                .and_then(|m| m.devices.get(device))
                .ok_or(INVALID_ARGUMENT)?;
            Device::Mig {
                parent,
                parent_index: gpu,
                mig,
            }
        }
    };
    gate(dev.gpu())?;
    costs::pay(costs.as_deref(), call);
    f(dev, &fixture)
}

/// The answer to "can this GPU be asked": sleeps its `hang_ms`, then `GPU_IS_LOST` if lost.
pub(crate) fn gate(gpu: &Gpu) -> Result<(), Ret> {
    sleep_ms(gpu.hang_ms);
    if gpu.lost {
        return Err(GPU_IS_LOST);
    }
    Ok(())
}

/// A call (named `call`, for its cost) on one device: snapshot, handle check, hang and
/// loss, the call's cost, then `f`. A MIG device handle is `INVALID_ARGUMENT` here (see
/// [`with_device`] for the calls that take one).
pub(crate) fn with_gpu<T>(
    call: &'static str,
    device: nvmlDevice_t,
    f: impl FnOnce(&Gpu, &Fixture) -> Result<T, Ret>,
) -> Result<T, Ret> {
    with_gpu_at(call, device, |_, gpu, fixture| f(gpu, fixture))
}

/// [`with_gpu`], telling `f` the GPU's index too.
pub(crate) fn with_gpu_at<T>(
    call: &'static str,
    device: nvmlDevice_t,
    f: impl FnOnce(usize, &Gpu, &Fixture) -> Result<T, Ret>,
) -> Result<T, Ret> {
    let (fixture, costs) = current()?;
    sleep_ms(fixture.hang_ms);
    let index = index_of(device, &fixture)?;
    let gpu = &fixture.gpus[index];
    gate(gpu)?;
    costs::pay(costs.as_deref(), call);
    f(index, gpu, &fixture)
}

/// Creates an event set and returns its address.
pub(crate) fn event_set_create() -> Result<usize, Ret> {
    let mut state = lock();
    if state.init_count == 0 {
        return Err(UNINITIALIZED);
    }
    let anchor = Box::new(0u8);
    let address = std::ptr::from_ref::<u8>(&anchor) as usize;
    state
        .event_sets
        .insert(address, (anchor, EventSet::default()));
    Ok(address)
}

/// Runs `f` on the event set at `address`; `INVALID_ARGUMENT` for an unknown address.
pub(crate) fn with_event_set<T>(
    address: usize,
    f: impl FnOnce(&mut EventSet) -> T,
) -> Result<T, Ret> {
    let mut state = lock();
    let (_, set) = state.event_sets.get_mut(&address).ok_or(INVALID_ARGUMENT)?;
    Ok(f(set))
}

/// Frees the event set at `address`.
pub(crate) fn event_set_free(address: usize) -> Result<(), Ret> {
    lock()
        .event_sets
        .remove(&address)
        .map(drop)
        .ok_or(INVALID_ARGUMENT)
}
