//! The knowledge store on both backends: entities merged on a second write, relations that must
//! point at entities that exist (a write naming one that does not changes nothing), search by
//! words and kind with each entity's relations both ways.

use serde_json::{Value, json};

use super::*;
use crate::backends_tests::Place;

const T0: i64 = 1_700_000_000_000_000;

fn at(kind: &str, name: &str) -> EntityRef {
    EntityRef {
        kind: kind.into(),
        name: name.into(),
    }
}

fn entity(kind: &str, name: &str, description: &str, properties: Value) -> NewEntity {
    let Value::Object(properties) = properties else {
        panic!("properties are an object")
    };
    NewEntity {
        entity: at(kind, name),
        description: Some(description.into()),
        properties,
        relations: Vec::new(),
    }
}

fn search(query: Option<&str>, kind: Option<&str>) -> KnowledgeSearch {
    KnowledgeSearch {
        query: query.map(str::to_owned),
        kind: kind.map(str::to_owned),
        limit: 10,
    }
}

on_both! {
    #[tokio::test]
    async fn entities_merge_relations_must_point_somewhere_and_search_shows_both_ways(b: Backend) {
        let place = Place::new(b).await;
        let s = place.open().await;
        let billing = entity("service", "billing", "Charges customers monthly", json!({"language": "rust", "port": 8080}));
        assert_eq!(
            s.knowledge_put(&billing, "agent-a", T0).await.unwrap(),
            EntityOutcome::Stored { created: true, relations_added: 0 }
        );
        // A relation to an entity that does not exist refuses the whole write.
        let mut ada = entity("person", "Ada", "Runs the billing team", json!({}));
        ada.relations = vec![("owns".into(), at("service", "billing")), ("owns".into(), at("service", "ledger"))];
        assert_eq!(
            s.knowledge_put(&ada, "agent-b", T0 + 1).await.unwrap(),
            EntityOutcome::MissingTarget { index: 1, target: at("service", "ledger") }
        );
        assert!(s.knowledge_search(&search(Some("Ada"), None)).await.unwrap().is_empty());
        ada.relations.pop();
        assert_eq!(
            s.knowledge_put(&ada, "agent-b", T0 + 1).await.unwrap(),
            EntityOutcome::Stored { created: true, relations_added: 1 }
        );
        // A second write merges: no description keeps the old, null removes a property, a
        // known relation is not added twice.
        let mut again = entity("service", "billing", "", json!({"port": null, "oncall": "ada"}));
        again.description = None;
        again.relations = vec![("depends_on".into(), at("service", "billing"))];
        assert_eq!(
            s.knowledge_put(&again, "agent-c", T0 + 2).await.unwrap(),
            EntityOutcome::Stored { created: false, relations_added: 1 }
        );

        let found = s.knowledge_search(&search(Some("who charges customers"), None)).await.unwrap();
        assert_eq!(found.len(), 1);
        let e = &found[0];
        assert_eq!(
            (&e.entity, e.description.as_str(), &e.properties, e.created_by.as_str(), e.updated_by.as_str()),
            (&at("service", "billing"), "Charges customers monthly", &json!({"language": "rust", "oncall": "ada"}), "agent-a", "agent-c")
        );
        let relations: Vec<(&str, &str, &str)> = e
            .relations
            .iter()
            .map(|r| (r.direction.as_str(), r.relation.as_str(), r.other.name.as_str()))
            .collect();
        assert_eq!(relations, [("out", "depends_on", "billing"), ("in", "owns", "Ada")]);
        // Properties are searched by their strings; a kind narrows.
        assert_eq!(s.knowledge_search(&search(Some("rust"), None)).await.unwrap().len(), 1);
        assert!(s.knowledge_search(&search(Some("rust"), Some("person"))).await.unwrap().is_empty());
        let people = s.knowledge_search(&search(None, Some("person"))).await.unwrap();
        assert_eq!(people.iter().map(|e| e.entity.name.as_str()).collect::<Vec<_>>(), ["Ada"]);
        assert_eq!(people[0].relations[0].direction, "out");
    }
}

on_both! {
    #[tokio::test]
    async fn a_kind_or_relation_that_is_not_a_word_is_refused_before_writing(b: Backend) {
        let place = Place::new(b).await;
        let s = place.open().await;
        let mut bad_relation = entity("service", "x", "", json!({}));
        bad_relation.relations = vec![("Owns It".into(), at("service", "x"))];
        for bad in [entity("Service", "x", "", json!({})), entity("service", "", "", json!({})), bad_relation] {
            let err = s.knowledge_put(&bad, "agent-a", T0).await.unwrap_err();
            assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
        }
        assert!(s.knowledge_search(&search(None, None)).await.unwrap().is_empty());
    }
}
