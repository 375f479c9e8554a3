//! Errors in MongoDB's own shape: a numeric code, its code name, a message, and for some codes
//! extra fields (duplicate key: keyPattern, keyValue).

use bson::Document;

#[derive(Clone, Debug, PartialEq)]
pub struct DocError {
    pub code: i32,
    pub code_name: &'static str,
    pub message: String,
    /// Extra fields of the error reply (e.g. `keyPattern`, `keyValue` for code 11000).
    pub extra: Option<Box<Document>>,
}

pub type DocResult<T> = Result<T, DocError>;

impl std::fmt::Display for DocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code_name, self.code, self.message)
    }
}

impl std::error::Error for DocError {}

macro_rules! codes {
    ($($fn_name:ident => $code:expr, $name:expr;)*) => {
        impl DocError {
            $(
                pub fn $fn_name(message: impl Into<String>) -> DocError {
                    DocError { code: $code, code_name: $name, message: message.into(), extra: None }
                }
            )*
        }
    };
}

// Codes and names as mongod reports them (src/mongo/base/error_codes.yml).
codes! {
    internal_error => 1, "InternalError";
    bad_value => 2, "BadValue";
    no_such_key => 4, "NoSuchKey";
    failed_to_parse => 9, "FailedToParse";
    type_mismatch => 14, "TypeMismatch";
    illegal_operation => 20, "IllegalOperation";
    namespace_not_found => 26, "NamespaceNotFound";
    index_not_found => 27, "IndexNotFound";
    path_not_viable => 28, "PathNotViable";
    conflicting_update_operators => 40, "ConflictingUpdateOperators";
    namespace_exists => 48, "NamespaceExists";
    command_not_found => 59, "CommandNotFound";
    immutable_field => 66, "ImmutableField";
    invalid_options => 72, "InvalidOptions";
    invalid_namespace => 73, "InvalidNamespace";
    index_options_conflict => 85, "IndexOptionsConflict";
    index_key_specs_conflict => 86, "IndexKeySpecsConflict";
    cursor_not_found => 43, "CursorNotFound";
    operation_failed => 96, "OperationFailed";
    invalid_id_field => 53, "InvalidIdField";
    dollar_prefixed_field_name => 52, "DollarPrefixedFieldName";
    empty_field_name => 56, "EmptyFieldName";
    bson_object_too_large => 10334, "BSONObjectTooLarge";
    location_15955 => 15955, "Location15955";
    storage_error => 8, "UnknownError";
}

impl DocError {
    /// mongod's DuplicateKey code.
    pub const DUPLICATE_KEY: i32 = 11000;
    /// mongod's OutOfDiskSpace code (a write failed on a full disk).
    pub const OUT_OF_DISK_SPACE: i32 = 14031;
    /// The code of a write refused after a failed sync (UnknownError, docdb's storage_error).
    pub const WRITES_REFUSED: i32 = 8;

    /// Duplicate key (11000) with mongod's message text, `keyPattern` and `keyValue`.
    pub fn duplicate_key(
        ns: &str,
        index_name: &str,
        key_pattern: Document,
        key_value: Document,
    ) -> DocError {
        let shown = key_value
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut extra = Document::new();
        extra.insert("keyPattern", key_pattern);
        extra.insert("keyValue", key_value);
        DocError {
            code: DocError::DUPLICATE_KEY,
            code_name: "DuplicateKey",
            message: format!(
                "E11000 duplicate key error collection: {ns} index: {index_name} dup key: {{ {shown} }}"
            ),
            extra: Some(Box::new(extra)),
        }
    }

    /// Any other code (for codes without a constructor above).
    pub fn with_code(code: i32, code_name: &'static str, message: impl Into<String>) -> DocError {
        DocError {
            code,
            code_name,
            message: message.into(),
            extra: None,
        }
    }
}
