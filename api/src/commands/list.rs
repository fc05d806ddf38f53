//! `list` (and `query`, `count`, the exec store's `list`): the beads matching a filter, a page
//! at a time.

use serde::{Deserialize, Serialize};

use super::ReadCommand;
use crate::command::ListFilter;
use crate::model::Namespace;
use crate::outcome::{Outcome, Refusal};
use crate::state::NamespaceState;

registered!(read 17 List);

/// List the beads matching a filter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct List(pub ListFilter);

impl ReadCommand for List {
    const NAME: &'static str = "list";

    fn read(&self, _name: &Namespace, namespace: &NamespaceState) -> Result<Outcome, Refusal> {
        namespace.list(&self.0)
    }
}

/// The protobuf mapping, both ways (the only part of the file that knows protobuf types).
mod wire {
    use super::List;
    use crate::command::{ListCursor, ListFilter, ListSort};
    use crate::convert::{ToReadRequest, namespace_of, parse_key_value, parse_status, read_request};
    use crate::model::BeadId;
    use crate::outcome::Refusal;
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    read_request!(pb::ListRequest, |request, _now| {
        let namespace = namespace_of(request.header.as_ref().map_or("", |header| header.namespace.as_str()));
        let after = if request.after.is_empty() { None } else { Some(ListCursor::decode(&request.after, &namespace)?) };
        let sort = match request.sort.as_str() {
            "" | "created_desc" => ListSort::CreatedDesc,
            "created_asc" => ListSort::CreatedAsc,
            other => {
                return Err(Refusal::Invalid(format!("unknown sort {other:?}; use created_asc or created_desc")));
            }
        };
        let statuses = request.status.iter().chain(&request.statuses).map(|text| parse_status(text));
        let metadata_equals = request.metadata_equals.iter().map(|pair| parse_key_value(pair));
        Ok(List(ListFilter {
            statuses: statuses.collect::<Result<_, _>>()?,
            assignee: request.assignee,
            labels_all: request.labels_all,
            bead_type: request.r#type,
            parent: request.parent.map(BeadId),
            metadata_equals: metadata_equals.collect::<Result<_, _>>()?,
            all: request.all,
            limit: request.limit,
            sort,
            after,
        })
        .into())
    });

    impl ToReadRequest for List {
        fn to_request(&self, header: pb::ReadHeader) -> ClientRpc {
            let filter = self.0.clone();
            let namespace = namespace_of(&header.namespace);
            pb::ListRequest {
                after: filter.after.as_ref().map(|cursor| cursor.encode(&namespace)).unwrap_or_default(),
                header: Some(header),
                // The first status goes in `status`, the others in `statuses`: a server that
                // predates `statuses` then lists fewer beads than asked rather than every bead,
                // closed ones included.
                status: filter.statuses.first().map(|status| status.as_str().to_string()),
                statuses: filter.statuses.iter().skip(1).map(|status| status.as_str().to_string()).collect(),
                assignee: filter.assignee,
                labels_all: filter.labels_all,
                r#type: filter.bead_type,
                parent: filter.parent.map(|id| id.0),
                metadata_equals: filter.metadata_equals.iter().map(|(key, value)| format!("{key}={value}")).collect(),
                all: filter.all,
                limit: filter.limit,
                sort: match filter.sort {
                    ListSort::CreatedAsc => "created_asc".into(),
                    ListSort::CreatedDesc => "created_desc".into(),
                },
            }
            .into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Query;
    use crate::convert::{IntoRead, read_to_proto};
    use crate::model::{Status, Timestamp};
    use crate::proto as pb;
    use crate::registry::ClientRpc;

    #[test]
    fn a_list_by_statuses_crosses_the_wire_unchanged_and_one_status_keeps_the_old_field() {
        let several = vec![Status::Open, Status::Blocked, Status::Deferred];
        for statuses in [Vec::new(), vec![Status::Closed], several] {
            let filter = ListFilter { statuses: statuses.clone(), all: true, ..Default::default() };
            let query = Query::from(List(filter));
            let ClientRpc::List(request) = read_to_proto(pb::ReadHeader::default(), &query) else {
                panic!("a list query becomes a ListRequest")
            };
            assert_eq!(request.status.is_some(), !statuses.is_empty(), "{statuses:?}");
            assert_eq!(request.statuses.len(), statuses.len().saturating_sub(1));
            assert_eq!(request.into_read(Timestamp(0)).unwrap().query, query);
        }
        let bogus = pb::ListRequest { statuses: vec!["bogus".into()], all: true, ..Default::default() };
        assert!(bogus.into_read(Timestamp(0)).is_err(), "an unknown status is refused");
    }
}
