//! Every form of [`homeroom::worker!`] a team may write, type-checked for wasm32 by the test
//! command (`cargo clippy --target wasm32-unknown-unknown -p homeroom-worker-forms`) and
//! natively by the workspace's clippy, so a form the repository's own Worker does not use
//! still compiles: a kind with a second kind of object (`companion`), `public` routes after
//! it, and document kinds with and without rules (made from the deployment's variables). Never
//! deployed.

homeroom::worker! {
    "rooms" => Room(homeroom::room::rules::Open), binding "ROOMS";
    "lots" => Lots(homeroom::room::rules::Open), binding "LOTS",
        companion LotsAside(aside::Aside), binding "LOTS_ASIDE", public ["GET lot"];
    documents {
        "pages" => Page, binding "PAGES";
        "forms" => Form(homeroom::room::rules::with_vars(
            |_vars: &homeroom::doc::rules::Vars<'_>| homeroom::doc::rules::Open
        )), binding "FORMS";
    }
}

/// The simplest companion there is: it answers every request with its name.
#[cfg(target_arch = "wasm32")]
mod aside {
    use worker::{Env, Request, Response, Result, State};

    pub struct Aside;

    impl homeroom::host::Object for Aside {
        async fn fetch(&self, _req: Request) -> Result<Response> {
            Response::ok("aside")
        }
    }

    impl homeroom::host::Companion for Aside {
        fn new(_state: State, _env: Env) -> Self {
            Aside
        }
    }
}
