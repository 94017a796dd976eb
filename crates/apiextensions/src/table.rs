//! The Table a real server returns for a custom resource (`kubectl get`): apiextensions'
//! `tableconvertor` with `serveDefaultColumnsIfEmpty`.

use serde_json::{Value, json};

use crate::error::FieldError;
use crate::jsonpath::{PrinterColumnPath, parse_printer_column_path, printer_column_cell_at};

/// ObjectMeta's `name` description, which the real server puts on the Name column.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// ObjectMeta's `creationTimestamp` description, used by the default Age column.
const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

#[derive(Debug, Clone)]
struct Column {
    name: String,
    column_type: String,
    format: String,
    description: String,
    priority: i64,
    path: PrinterColumnPath,
}

/// The printer columns of one CRD version, parsed once when the CRD is registered.
#[derive(Debug, Clone)]
pub struct PrinterColumns {
    columns: Vec<Column>,
}

impl PrinterColumns {
    /// Reads `additionalPrinterColumns` of a CRD version (`spec.versions[i]`); without any,
    /// the single default `Age` column the real server serves.
    ///
    /// # Errors
    /// The column definition errors the real server reports (at `path`, e.g.
    /// `spec.versions[0].additionalPrinterColumns`).
    pub fn from_crd_version(version: &Value, path: &str) -> Result<Self, Vec<FieldError>> {
        let defined = version["additionalPrinterColumns"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let definitions = if defined.is_empty() {
            vec![
                json!({"name": "Age", "type": "date", "description": CREATION_TIMESTAMP_DESCRIPTION,
                "jsonPath": ".metadata.creationTimestamp"}),
            ]
        } else {
            defined
        };
        let mut errors = Vec::new();
        let mut columns = Vec::new();
        for (i, definition) in definitions.iter().enumerate() {
            let found = crate::crd::validate_printer_column(definition, &format!("{path}[{i}]"));
            if !found.is_empty() {
                errors.extend(found);
                continue;
            }
            let text = |key: &str| definition[key].as_str().unwrap_or_default().to_string();
            let json_path = text("jsonPath");
            let Ok(parsed) = parse_printer_column_path(&json_path) else {
                continue;
            };
            let description = match text("description") {
                d if d.is_empty() => {
                    format!("Custom resource definition column (in JSONPath format): {json_path}")
                }
                d => d,
            };
            columns.push(Column {
                name: text("name"),
                column_type: text("type"),
                format: text("format"),
                description,
                priority: definition["priority"].as_i64().unwrap_or(0),
                path: parsed,
            });
        }
        if errors.is_empty() {
            Ok(Self { columns })
        } else {
            Err(errors)
        }
    }

    /// `columnDefinitions` of the Table: `Name` first, then the CRD's columns.
    #[must_use]
    pub fn column_definitions(&self) -> Vec<Value> {
        let mut out = vec![json!({"name": "Name", "type": "string", "format": "name",
            "description": NAME_DESCRIPTION, "priority": 0})];
        out.extend(self.columns.iter().map(|c| {
            json!({"name": c.name, "type": c.column_type, "format": c.format,
                "description": c.description, "priority": c.priority})
        }));
        out
    }

    /// The `cells` of an object's row: its name, then each column's cell (`null` when the
    /// path selects nothing; kubectl prints `<none>`), dates as ages relative to `now`.
    #[must_use]
    pub fn cells(&self, object: &Value, now: chrono::DateTime<chrono::Utc>) -> Vec<Value> {
        let mut cells = vec![object["metadata"]["name"].clone()];
        cells.extend(
            self.columns
                .iter()
                .map(|c| printer_column_cell_at(object, &c.path, &c.column_type, now)),
        );
        cells
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn default_age_column_when_none_are_defined() {
        let columns = PrinterColumns::from_crd_version(&json!({"name": "v1"}), "c").unwrap();
        let defs = columns.column_definitions();
        assert_eq!(defs.len(), 2);
        assert_eq!(defs[1]["name"], "Age");
        let now = chrono::DateTime::parse_from_rfc3339("2024-01-03T00:00:00Z")
            .unwrap()
            .to_utc();
        let object =
            json!({"metadata": {"name": "a", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(columns.cells(&object, now), [json!("a"), json!("2d")]);
    }

    #[test]
    fn defined_columns_replace_the_default() {
        let version = json!({"additionalPrinterColumns": [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "CPUs", "type": "integer", "jsonPath": ".spec.cpus", "priority": 1}
        ]});
        let columns = PrinterColumns::from_crd_version(&version, "c").unwrap();
        let defs = columns.column_definitions();
        assert_eq!(defs.len(), 3);
        assert_eq!(
            defs[1]["description"],
            "Custom resource definition column (in JSONPath format): .status.phase"
        );
        assert_eq!(defs[2]["priority"], 1);
        let now = chrono::Utc::now();
        let object = json!({"metadata": {"name": "a"}, "spec": {"cpus": 2}});
        assert_eq!(
            columns.cells(&object, now),
            [json!("a"), Value::Null, json!(2)]
        );
        assert!(
            PrinterColumns::from_crd_version(
                &json!({"additionalPrinterColumns": [{"name": "X"}]}),
                "c"
            )
            .is_err()
        );
    }
}
