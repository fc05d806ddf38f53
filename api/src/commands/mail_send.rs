//! `mail send BODY --to R` and `mail reply ID BODY`: send a message (from the proposal's actor),
//! or a reply to the original sender.

use super::{Context, NamespaceWrite, WriteCommand};
use crate::auth::Role;
use crate::limits::{DESCRIPTION_BYTES_MAX, TITLE_BYTES_MAX};
use crate::outcome::{Answer, Refusal};
use crate::state::NamespaceState;
use crate::validate::{check_identifier, check_names, check_size};

registered!(write 24 MailSend);

pub use crate::input::MailSend;

impl WriteCommand for MailSend {
    const NAME: &'static str = "mail_send";
    const ROLE: Role = Role::Agent;

    fn validate(&self) -> Result<(), Refusal> {
        check_names(&[("recipient", &self.to)])?;
        check_identifier("recipient", &self.to)?;
        check_size("subject", &self.subject, TITLE_BYTES_MAX)?;
        check_size("body", &self.body, DESCRIPTION_BYTES_MAX)
    }

    fn samples() -> Vec<MailSend> {
        vec![MailSend {
            to: "bob".into(),
            subject: "Review".into(),
            body: "Please look at st-1.".into(),
            reply_to: Some(super::samples::bead_id(4)),
        }]
    }
}

impl NamespaceWrite for MailSend {
    fn apply(&self, namespace: &mut NamespaceState, context: &Context) -> Answer {
        namespace.mail_send(self, context.actor, context.now)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::MailSend;
    use crate::convert::{ToWriteRequest, optional_id, write_request};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    write_request!(pb::MailSendRequest, |request| {
        let reply_to = optional_id(&request.reply_to);
        Ok(MailSend { to: request.to, subject: request.subject, body: request.body, reply_to }.into())
    });

    impl ToWriteRequest for MailSend {
        fn to_request(&self, header: pb::WriteHeader) -> Option<ClientRpc> {
            let mail = self.clone();
            let reply_to = mail.reply_to.map(|id| id.0).unwrap_or_default();
            let request = pb::MailSendRequest {
                header: Some(header),
                to: mail.to,
                subject: mail.subject,
                body: mail.body,
                reply_to,
            };
            Some(request.into())
        }
    }
}
