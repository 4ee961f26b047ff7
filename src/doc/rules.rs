//! A document kind's rules: who may change the document, which members' updates the room
//! takes, and edits the room makes itself. The document counterpart of [`crate::room::rules`]:
//! a plain Rust value called inside the room's turn, pure and deterministic (no clock, no
//! randomness), so the simulated tests drive it like the engine.
//!
//! A rule reads the document through read transactions only; everything it changes goes
//! through [`DocCtx::edit`], which the room applies after the hook returns, stores, and then
//! sends to every editor (stored before seen, like a member's update).
//!
//! **A panic resets the whole Wasm instance**, as for rooms: refuse with a value instead.
//!
//! ```
//! use homeroom::doc::rules::{Change, DocCtx, DocRules, Editor, Verdict};
//! use homeroom::doc::yrs::{GetString, ReadTxn};
//! use homeroom::room::rules::Refusal;
//!
//! /// Documents whose `title` holds at most 100 characters.
//! #[derive(Clone)]
//! struct ShortTitles;
//!
//! impl DocRules for ShortTitles {
//!     fn update(&mut self, _doc: &mut DocCtx<'_>, _who: &Editor<'_>, change: &Change<'_>) -> Verdict {
//!         let after = change.after();
//!         let title = after.get_text("title").map(|t| t.get_string(&after)).unwrap_or_default();
//!         if title.chars().count() > 100 {
//!             return Verdict::Refuse(Refusal::new("title_too_long", "a title holds 100 characters"));
//!         }
//!         Verdict::Accept
//!     }
//! }
//! ```

use std::cell::{Cell, OnceCell};

use yrs::updates::decoder::Decode;
use yrs::{
    ClientID, Doc, Options, ReadTxn, StateVector, Transact, Transaction, TransactionMut, Update,
};

pub use crate::room::rules::{Refusal, Request, Response, Vars};

/// Who is acting on the document.
#[derive(Debug, Clone, Copy)]
pub struct Editor<'a> {
    /// The token's user (anonymous dev mode: the socket's own name).
    pub user: &'a str,
    /// Read-only by the token (`info.read_only`) or by [`DocRules::join`].
    pub read_only: bool,
}

/// What [`DocRules::join`] decides about an editor connecting.
#[derive(Debug)]
pub enum Access {
    /// Let them in; read-only if their token says so.
    Write,
    /// Let them in to read: every change they send is refused (`read_only`).
    ReadOnly,
    /// Keep them out: the socket is closed with 4403 and the refusal's code as the reason (a
    /// stock provider does not retry a close in 4400-4499).
    Refuse(Refusal),
}

/// What [`DocRules::update`] decides about a member's update.
#[derive(Debug)]
pub enum Verdict {
    /// Apply, store and send it.
    Accept,
    /// Change nothing: the sender hears `refused` with the code (with `homeroom=1`), nobody
    /// else hears anything, and the socket stays open.
    Refuse(Refusal),
}

/// A member's update as a rule sees it: the document before it and, built on first use, the
/// document as it would be after it.
pub struct Change<'a> {
    pub(crate) before: &'a Doc,
    pub(crate) update: &'a [u8],
    /// The trial document, once built: a copy of the room's with the update applied.
    pub(crate) trial: &'a OnceCell<Doc>,
    /// The copy the room kept from the last trial (in step with the document), if any.
    pub(crate) kept: &'a Cell<Option<Doc>>,
}

impl Change<'_> {
    /// The document as it is, without the update.
    pub fn before(&self) -> Transaction<'_> {
        self.before.transact()
    }

    /// The document as it would be with the update. The first call in a room builds a copy
    /// of the document, which the room then keeps in step with every change: a kind whose
    /// rules call this holds its document twice in memory and applies every update twice. An
    /// update refused after this was called costs the room its copy, and its sender the
    /// document's size from what they may send.
    pub fn after(&self) -> Transaction<'_> {
        self.trial
            .get_or_init(|| {
                let doc = self.kept.take().unwrap_or_else(|| copy_of(self.before));
                apply(&doc, self.update);
                doc
            })
            .transact()
    }

    /// The update's size (bytes, as sent).
    pub fn len(&self) -> usize {
        self.update.len()
    }

    /// Whether the update is empty (never: an empty update changes nothing and is not asked).
    pub fn is_empty(&self) -> bool {
        self.update.is_empty()
    }
}

/// A change the rules make, applied as one transaction of the room's own.
pub(crate) type Edit = Box<dyn FnOnce(&mut TransactionMut<'_>)>;

/// The document room as a hook sees it: read the document, see who edits, edit as the room.
pub struct DocCtx<'a> {
    pub(crate) now: u64,
    pub(crate) doc: &'a Doc,
    /// Lists the editors when a rule asks (not on every update).
    pub(crate) editors: &'a dyn Fn() -> Vec<&'a str>,
    pub(crate) edits: Vec<Edit>,
}

impl<'a> DocCtx<'a> {
    pub(crate) fn new(now: u64, doc: &'a Doc, editors: &'a dyn Fn() -> Vec<&'a str>) -> DocCtx<'a> {
        DocCtx { now, doc, editors, edits: Vec::new() }
    }

    /// The time of the event being handled (ms since the epoch).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The document as it is now (before the change being decided, in [`DocRules::update`]).
    pub fn read(&self) -> Transaction<'_> {
        self.doc.transact()
    }

    /// The users with a socket open on the document (one entry per socket; in `join`, not
    /// yet the one joining).
    pub fn editors(&self) -> Vec<&'a str> {
        (self.editors)()
    }

    /// Changes the document as the room, in a transaction of its own applied after the hook
    /// returns (after the update being decided, if it is accepted): stored, then sent to every
    /// editor. The room's bound on the document's size does not refuse the rules' own edits.
    ///
    /// ```
    /// # use homeroom::doc::rules::DocCtx;
    /// use homeroom::doc::yrs::{Text, WriteTxn};
    /// fn sign(doc: &mut DocCtx<'_>) {
    ///     doc.edit(|txn| {
    ///         let log = txn.get_or_insert_text("log");
    ///         log.push(txn, "checked by the room\n");
    ///     });
    /// }
    /// ```
    pub fn edit(&mut self, edit: impl FnOnce(&mut TransactionMut<'_>) + 'static) {
        self.edits.push(Box::new(edit));
    }
}

/// The rules of one document kind. Every hook has a default that accepts, so a rule implements
/// only what it decides.
pub trait DocRules: 'static {
    /// An editor connects (after the token's checks; `who.read_only` is the token's word).
    fn join(&mut self, doc: &mut DocCtx<'_>, who: &Editor<'_>) -> Access {
        let _ = (doc, who);
        Access::Write
    }

    /// A member's update that would change the document (not one from a read-only member,
    /// which is refused before, nor the backend's or the rules' own).
    fn update(&mut self, doc: &mut DocCtx<'_>, who: &Editor<'_>, change: &Change<'_>) -> Verdict {
        let _ = (doc, who, change);
        Verdict::Accept
    }

    /// A request to a path under the room no built-in route takes (`/{kind}/{room}/{path}`,
    /// from the admin key or a room token, as for rooms); `None` answers 404.
    fn request(&mut self, doc: &mut DocCtx<'_>, req: &Request) -> Option<Response> {
        let _ = (doc, req);
        None
    }
}

/// The rules of a document kind without rules: everything the token allows.
#[derive(Debug, Default, Clone, Copy)]
pub struct Open;

impl DocRules for Open {}

/// How a document kind gets its rules each time one of its rooms is loaded: a rules value
/// that is `Clone` is copied; [`crate::room::rules::with_vars`] makes them from the
/// deployment's variables.
pub trait MakeDocRules: 'static {
    /// Fresh rules for a room being loaded, from the deployment's variables.
    fn make(&self, vars: &Vars<'_>) -> Box<dyn DocRules>;
}

impl<R: DocRules + Clone> MakeDocRules for R {
    fn make(&self, _vars: &Vars<'_>) -> Box<dyn DocRules> {
        Box::new(self.clone())
    }
}

impl<F, R> MakeDocRules for crate::room::rules::WithVars<F>
where
    F: Fn(&Vars<'_>) -> R + 'static,
    R: DocRules,
{
    fn make(&self, vars: &Vars<'_>) -> Box<dyn DocRules> {
        Box::new((self.0)(vars))
    }
}

/// A document with the room's options (Yjs offsets, garbage collection on).
pub(crate) fn blank(client: u64) -> Doc {
    let mut options = Options::with_guid_and_client_id("homeroom".into(), ClientID::new(client));
    options.offset_kind = yrs::OffsetKind::Utf16; // as Yjs counts, so server edits agree
    options.skip_gc = false;
    Doc::with_options(options)
}

/// A copy of `doc`: its whole state applied to a blank document.
pub(crate) fn copy_of(doc: &Doc) -> Doc {
    let copy = blank(doc.client_id().get());
    let state = doc.transact().encode_state_as_update_v1(&StateVector::default());
    apply(&copy, &state);
    copy
}

/// Applies an update that the room checked integrates whole.
pub(crate) fn apply(doc: &Doc, update: &[u8]) -> bool {
    match Update::decode_v1(update) {
        Ok(update) => doc.transact_mut().apply_update(update).is_ok(),
        Err(_) => false,
    }
}
