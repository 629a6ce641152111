//! The caller's identity upstream as a stage: a call of an upstream with
//! `[servers.X.identity]` gets a token obtained for its verified caller
//! (see [`crate::call::identity`]), or ends here with an `isError` that
//! says why — before the upstream's rate limit is counted, and after a
//! person approved it (nothing is exchanged for a call that is refused).
//!
//! With `mode = "user"`, a caller whose account is not linked is sent to
//! the connect page ([`crate::call::linked`]): by a URL-mode elicitation
//! when their client can show one (the call then goes on once they have
//! linked it), otherwise by the link in the `isError`.
//!
//! Layer: `call`.

use std::sync::Arc;

use serde_json::Value;
use toolgate_server::ElicitAction;

use super::{Call, Reply, Stage};
use crate::call::identity::{NoToken, Obtained, SharedIdentity};
use crate::call::linked::{LINK_WAIT, Linking};

/// Obtains the token a call carries for its caller.
pub struct Identity<S> {
    identity: Option<SharedIdentity>,
    linking: Option<Arc<Linking>>,
    inner: S,
}

impl<S> Identity<S> {
    /// The stage of `identity` (none: calls pass straight on), with the
    /// gateway's `linking` for linked accounts, around `inner`.
    pub fn new(identity: Option<SharedIdentity>, linking: Option<Arc<Linking>>, inner: S) -> Self {
        Self {
            identity,
            linking,
            inner,
        }
    }
}

/// The key of the connect question in a call's rounds.
const CONNECT: &str = "connect-account";

impl<S: Stage> Stage for Identity<S> {
    fn names(&self, out: &mut Vec<&'static str>) {
        if self.identity.is_some() {
            out.push("caller identity");
        }
        self.inner.names(out);
    }

    async fn handle(&self, mut call: Box<Call>) -> Reply {
        let Some(identity) = &self.identity else {
            return self.inner.handle(call).await;
        };
        let linking = self.linking.as_deref();
        // Boxed: obtaining a token is a large future that the calls of
        // other upstreams' tools need not carry.
        let mut obtained =
            Box::pin(identity.token_for(call.ctx.auth(), &call.upstream_tool, linking)).await;
        if let (Err(NoToken::NotLinked(why)), Some(linking)) = (&obtained, linking) {
            match Box::pin(connect(&mut call, linking, why)).await? {
                Connected::Linked => {
                    obtained = Box::pin(identity.token_for(
                        call.ctx.auth(),
                        &call.upstream_tool,
                        Some(linking),
                    ))
                    .await;
                }
                Connected::Refused(text) => return call.refuse("account_not_linked", text),
            }
        }
        match obtained {
            Ok(Obtained { bearer, label }) => {
                call.ctx.note("identity", label);
                call.bearer = Some(bearer);
                self.inner.handle(call).await
            }
            Err(no) => {
                let text = no.text(&call.upstream.config.name);
                call.refuse(no.status(), text)
            }
        }
    }
}

/// How sending a caller to link their account ended.
enum Connected {
    /// They linked it: obtain the token again.
    Linked,
    /// The call ends with this text.
    Refused(String),
}

/// Send the caller of `call` to the connect page: a URL-mode elicitation
/// (`Err`: this round ends with it), then wait for the link; or, for a
/// client without URL mode, the link in the refusal.
async fn connect(
    call: &mut Call,
    linking: &Linking,
    why: &str,
) -> Result<Connected, toolgate_server::ToolError> {
    let server = call.upstream.config.name.clone();
    let Some(subject) = call.ctx.auth().and_then(|a| a.subject()).map(str::to_owned) else {
        return Ok(Connected::Refused(NoToken::NoCaller.text(&server)));
    };
    let url = linking.connect_url(&subject, &server);
    if !call.ctx.client_capabilities().supports_elicitation_url() {
        return Ok(Connected::Refused(format!(
            "The upstream server {server} acts as you, and your account there is not linked ({why}). Ask the user to open {url} to link it (the link works for them only, for 10 minutes), then call again."
        )));
    }
    let message = format!(
        "{server} acts as you through the gateway: link your account there to continue ({why})."
    );
    let id = crate::base::ids::new_nonce();
    match call.input.elicit_url(CONNECT, &message, &url, &id)? {
        None => {
            // Later rounds keep what this one settled (an approval).
            call.input.remember(Value::Object(call.carry.clone()));
            let input = std::mem::replace(&mut call.input, call.ctx.inputs());
            Err(input.ask())
        }
        Some(answer) if answer.action == ElicitAction::Accept => {
            // Within the call's own time, leaving room for the call itself.
            let wait = LINK_WAIT.min(call.upstream.config.call_timeout() * 3 / 4);
            if linking.wait_linked(&subject, &server, wait).await {
                Ok(Connected::Linked)
            } else {
                Ok(Connected::Refused(format!(
                    "Your account at {server} is still not linked. Finish at {url} and call again."
                )))
            }
        }
        Some(_) => Ok(Connected::Refused(format!(
            "You chose not to link your account at {server}; the call was not sent."
        ))),
    }
}
