//! `purge --dry-run`: what `purge` would remove now (the wisps closed at least an age ago).

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::model::{Namespace, Timestamp};
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 14 PurgePreview);

/// Show what a purge would remove.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgePreview {
    /// Minimum age since close, in milliseconds.
    pub older_than_ms: i64,
    /// The reader's clock (the node sets it; a client's is ignored).
    pub now: Timestamp,
}

impl ReadCommand for PurgePreview {
    const NAME: &'static str = "purge_preview";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        Ok(namespace.purge_preview(self.older_than_ms, self.now))
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::PurgePreview;
    use crate::convert::{ToReadRequest, read_request};
    use crate::outcome::Refusal;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::PurgePreviewRequest, |request, now| {
        if request.older_than_ms < 0 {
            return Err(Refusal::Invalid(format!(
                "purge: older_than_ms {} is negative; give an age in milliseconds, 0 or more",
                request.older_than_ms
            )));
        }
        Ok(PurgePreview { older_than_ms: request.older_than_ms, now }.into())
    });

    impl ToReadRequest for PurgePreview {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            pb::PurgePreviewRequest { header: Some(header), older_than_ms: self.older_than_ms }.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::convert::IntoRead;
    use crate::model::Timestamp;
    use crate::proto as pb;

    #[test]
    fn a_purge_preview_with_a_negative_age_is_refused_like_the_purge() {
        let preview = pb::PurgePreviewRequest { older_than_ms: -1, ..Default::default() };
        let refusal = preview.into_read(Timestamp(0)).expect_err("a negative age is refused");
        assert!(refusal.to_string().contains("negative"), "{refusal}");
    }
}
