//! Deciding the agent's `session/request_permission` requests: every one goes to a
//! [`PermissionHandler`]; the default, [`RejectAll`], approves nothing.

use std::future::Future;
use std::pin::Pin;

use crate::wire::default as wire;

/// The answer to one permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionDecision {
    /// Approve once: the request's `allow_once` option (or `allow_always` when it offers no
    /// `allow_once`). A request offering neither is rejected.
    Approve,
    /// Reject: the request's `reject_once` option (or `reject_always`; or the `cancelled`
    /// outcome when it offers neither).
    Reject,
    /// Select this option, which must be one of the request's (else the request is rejected).
    Select(wire::PermissionOptionId),
}

/// A boxed future, as [`PermissionHandler::decide`] returns it.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Decides permission requests — usually by asking the user. Each call is bounded by
/// [`ClientOptions::permission_timeout`](super::ClientOptions::permission_timeout); running out
/// of time, or the turn being cancelled, counts as [`PermissionDecision::Reject`].
///
/// Any `Fn(RequestPermissionRequest) -> impl Future<Output = PermissionDecision>` is one.
pub trait PermissionHandler: Send + Sync + 'static {
    /// The decision for one request.
    fn decide(&self, request: wire::RequestPermissionRequest) -> BoxFuture<PermissionDecision>;
}

impl<F, Fut> PermissionHandler for F
where
    F: Fn(wire::RequestPermissionRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = PermissionDecision> + Send + 'static,
{
    fn decide(&self, request: wire::RequestPermissionRequest) -> BoxFuture<PermissionDecision> {
        Box::pin(self(request))
    }
}

/// The default handler: rejects every request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RejectAll;

impl PermissionHandler for RejectAll {
    fn decide(&self, _: wire::RequestPermissionRequest) -> BoxFuture<PermissionDecision> {
        Box::pin(async { PermissionDecision::Reject })
    }
}

fn option_of(
    request: &wire::RequestPermissionRequest,
    kinds: [wire::PermissionOptionKind; 2],
) -> Option<wire::PermissionOptionId> {
    kinds.iter().find_map(|kind| {
        request
            .options
            .iter()
            .find(|option| option.kind == *kind)
            .map(|option| option.option_id.clone())
    })
}

/// The outcome to answer with.
pub(crate) fn outcome(
    request: &wire::RequestPermissionRequest,
    decision: &PermissionDecision,
) -> wire::RequestPermissionOutcome {
    use wire::PermissionOptionKind as Kind;
    let reject = || match option_of(request, [Kind::RejectOnce, Kind::RejectAlways]) {
        Some(id) => wire::RequestPermissionOutcome::Selected(wire::SelectedPermissionOutcome::new(id)),
        None => wire::RequestPermissionOutcome::Cancelled,
    };
    let chosen = match decision {
        PermissionDecision::Reject => None,
        PermissionDecision::Approve => option_of(request, [Kind::AllowOnce, Kind::AllowAlways]),
        PermissionDecision::Select(id) => request
            .options
            .iter()
            .any(|option| option.option_id == *id)
            .then(|| id.clone()),
    };
    match chosen {
        Some(id) => wire::RequestPermissionOutcome::Selected(wire::SelectedPermissionOutcome::new(id)),
        None => reject(),
    }
}

/// Whether `outcome` selects one of the request's allow options.
pub(crate) fn approves(request: &wire::RequestPermissionRequest, outcome: &wire::RequestPermissionOutcome) -> bool {
    use wire::PermissionOptionKind as Kind;
    match outcome {
        wire::RequestPermissionOutcome::Selected(selected) => request.options.iter().any(|option| {
            option.option_id == selected.option_id && matches!(option.kind, Kind::AllowOnce | Kind::AllowAlways)
        }),
        _ => false,
    }
}
