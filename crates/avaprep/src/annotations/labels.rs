//! Label maps in protobuf text form, both AVA spellings:
//! `label { name: "..." label_id: N label_type: KIND }` and
//! `item { name: "..." id: N }`.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::{AnnotationError, LineError};
use super::lines::{display_name, line_error, read_file};
use super::types::ActionId;

/// The category AVA gives each action in the 80-class map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LabelKind {
    PersonMovement,
    ObjectManipulation,
    PersonInteraction,
}

impl LabelKind {
    /// The `label_type` as a label map writes it.
    pub fn as_pbtxt(self) -> &'static str {
        match self {
            Self::PersonMovement => "PERSON_MOVEMENT",
            Self::ObjectManipulation => "OBJECT_MANIPULATION",
            Self::PersonInteraction => "PERSON_INTERACTION",
        }
    }

    fn from_pbtxt(s: &str) -> Option<Self> {
        match s {
            "PERSON_MOVEMENT" => Some(Self::PersonMovement),
            "OBJECT_MANIPULATION" => Some(Self::ObjectManipulation),
            "PERSON_INTERACTION" => Some(Self::PersonInteraction),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    pub id: ActionId,
    pub name: String,
    /// `None` for the `item { }` form, which has no type.
    pub kind: Option<LabelKind>,
}

/// Labels in file order with O(1) lookup by id. Ids and names are unique and
/// ids are non-zero.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Label>", into = "Vec<Label>")]
pub struct LabelMap {
    labels: Vec<Label>,
    /// `index[id]` is the position in `labels` plus one; 0 means absent.
    index: Vec<u16>,
}

/// Why a list of labels is not a [`LabelMap`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelMapError {
    #[error("duplicate label id {0}")]
    DuplicateId(u16),
    #[error("duplicate label name {0:?}")]
    DuplicateName(String),
    #[error("label id 0 is invalid: AVA action ids start at 1")]
    ZeroId,
}

impl LabelMap {
    pub fn new(labels: Vec<Label>) -> Result<Self, LabelMapError> {
        let mut names = HashMap::new();
        let max = labels.iter().map(|l| l.id.0).max().unwrap_or(0);
        let mut index = vec![0u16; usize::from(max) + 1];
        for (pos, label) in labels.iter().enumerate() {
            if label.id.0 == 0 {
                return Err(LabelMapError::ZeroId);
            }
            let slot = &mut index[usize::from(label.id.0)];
            if *slot != 0 {
                return Err(LabelMapError::DuplicateId(label.id.0));
            }
            // A map has at most u16::MAX distinct non-zero ids, so this fits.
            *slot = (pos + 1) as u16;
            if names.insert(label.name.as_str(), ()).is_some() {
                return Err(LabelMapError::DuplicateName(label.name.clone()));
            }
        }
        Ok(Self { labels, index })
    }

    pub fn labels(&self) -> &[Label] {
        &self.labels
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    pub fn get(&self, id: ActionId) -> Option<&Label> {
        let pos = *self.index.get(usize::from(id.0))?;
        pos.checked_sub(1).map(|p| &self.labels[usize::from(p)])
    }

    pub fn contains(&self, id: ActionId) -> bool {
        self.get(id).is_some()
    }

    pub fn name(&self, id: ActionId) -> Option<&str> {
        self.get(id).map(|l| l.name.as_str())
    }

    /// Ids in file order.
    pub fn ids(&self) -> impl Iterator<Item = ActionId> + '_ {
        self.labels.iter().map(|l| l.id)
    }
}

impl TryFrom<Vec<Label>> for LabelMap {
    type Error = LabelMapError;

    fn try_from(labels: Vec<Label>) -> Result<Self, LabelMapError> {
        Self::new(labels)
    }
}

impl From<LabelMap> for Vec<Label> {
    fn from(map: LabelMap) -> Self {
        map.labels
    }
}

/// Reads `ava_action_list_v2.2.pbtxt` or its `_for_activitynet_2019` subset.
pub fn read_label_map(path: &Path) -> Result<LabelMap, AnnotationError> {
    parse_label_map(&read_file(path)?, &display_name(path))
}

/// Parses a label map already in memory; `file` names it in errors.
pub fn parse_label_map(bytes: &[u8], file: &str) -> Result<LabelMap, AnnotationError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        line_error(file, line, LineError::InvalidUtf8)
    })?;
    let labels = Parser::new(text)
        .entries()
        .map_err(|(line, kind)| line_error(file, line, kind))?;
    if labels.is_empty() {
        return Err(AnnotationError::Empty {
            file: file.to_owned(),
            what: "label map",
        });
    }
    // Duplicates were reported with their lines while parsing.
    LabelMap::new(labels).map_err(|e| {
        line_error(
            file,
            1,
            LineError::UnexpectedToken {
                found: e.to_string(),
                expected: "a valid label map",
            },
        )
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    Open,
    Close,
    Colon,
    Word(&'a str),
    Str(String),
}

impl Token<'_> {
    fn describe(&self) -> String {
        match self {
            Token::Open => "'{'".into(),
            Token::Close => "'}'".into(),
            Token::Colon => "':'".into(),
            Token::Word(w) => format!("{w:?}"),
            Token::Str(s) => format!("string {s:?}"),
        }
    }
}

type Located<T> = Result<T, (usize, LineError)>;

/// Which of the two AVA entry forms a block is.
#[derive(Clone, Copy)]
struct BlockForm {
    name: &'static str,
    id_field: &'static str,
    allowed: &'static str,
    has_type: bool,
}

const LABEL_FORM: BlockForm = BlockForm {
    name: "label",
    id_field: "label_id",
    allowed: "name, label_id, label_type",
    has_type: true,
};

const ITEM_FORM: BlockForm = BlockForm {
    name: "item",
    id_field: "id",
    allowed: "name, id",
    has_type: false,
};

#[derive(Default)]
struct PartialLabel {
    name: Option<String>,
    id: Option<ActionId>,
    kind: Option<LabelKind>,
}

struct Parser<'a> {
    rest: &'a str,
    line: usize,
    seen_ids: HashMap<u16, usize>,
    seen_names: HashMap<String, usize>,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            rest: text,
            line: 1,
            seen_ids: HashMap::new(),
            seen_names: HashMap::new(),
        }
    }

    fn entries(mut self) -> Located<Vec<Label>> {
        let mut labels = Vec::new();
        while let Some(token) = self.next_token()? {
            let form = match token {
                Token::Word("label") => LABEL_FORM,
                Token::Word("item") => ITEM_FORM,
                other => return Err(self.unexpected(&other, "'label' or 'item'")),
            };
            labels.push(self.block(form)?);
        }
        Ok(labels)
    }

    fn block(&mut self, form: BlockForm) -> Located<Label> {
        let start = self.line;
        // Text format allows an optional colon before a message value.
        let mut token = self.expect_token("'{'")?;
        if token == Token::Colon {
            token = self.expect_token("'{'")?;
        }
        if token != Token::Open {
            return Err(self.unexpected(&token, "'{'"));
        }
        let mut partial = PartialLabel::default();
        loop {
            match self.expect_token("a field name or '}'")? {
                Token::Close => break,
                Token::Word(field) => self.field(form, field, &mut partial)?,
                other => return Err(self.unexpected(&other, "a field name or '}'")),
            }
        }
        self.finish(form, partial, start)
    }

    fn field(&mut self, form: BlockForm, field: &str, partial: &mut PartialLabel) -> Located<()> {
        let colon = self.expect_token("':'")?;
        if colon != Token::Colon {
            return Err(self.unexpected(&colon, "':'"));
        }
        let line = self.line;
        let repeated = |field| Err((line, LineError::RepeatedField { field }));
        match field {
            "name" => {
                if partial.name.is_some() {
                    return repeated("name");
                }
                partial.name = Some(self.string_value()?);
            }
            f if f == form.id_field => {
                if partial.id.is_some() {
                    return repeated(form.id_field);
                }
                partial.id = Some(self.id_value()?);
            }
            "label_type" if form.has_type => {
                if partial.kind.is_some() {
                    return repeated("label_type");
                }
                partial.kind = Some(self.kind_value()?);
            }
            other => {
                return Err((
                    line,
                    LineError::UnknownField {
                        field: other.to_owned(),
                        block: form.name,
                        allowed: form.allowed,
                    },
                ));
            }
        }
        Ok(())
    }

    fn finish(&mut self, form: BlockForm, p: PartialLabel, start: usize) -> Located<Label> {
        let missing = |field| {
            (
                start,
                LineError::MissingField {
                    field,
                    block: form.name,
                },
            )
        };
        let name = p.name.ok_or_else(|| missing("name"))?;
        let id = p.id.ok_or_else(|| missing(form.id_field))?;
        if form.has_type && p.kind.is_none() {
            return Err(missing("label_type"));
        }
        if let Some(&first_line) = self.seen_ids.get(&id.0) {
            return Err(duplicate(start, "label id", id.to_string(), first_line));
        }
        if let Some(&first_line) = self.seen_names.get(&name) {
            return Err(duplicate(start, "label name", name, first_line));
        }
        self.seen_ids.insert(id.0, start);
        self.seen_names.insert(name.clone(), start);
        Ok(Label {
            id,
            name,
            kind: p.kind,
        })
    }

    fn string_value(&mut self) -> Located<String> {
        match self.expect_token("a quoted string")? {
            Token::Str(s) => Ok(s),
            other => Err(self.unexpected(&other, "a quoted string")),
        }
    }

    fn id_value(&mut self) -> Located<ActionId> {
        let token = self.expect_token("a label id")?;
        let Token::Word(w) = token else {
            return Err(self.unexpected(&token, "a label id"));
        };
        match w.parse::<u16>() {
            Ok(0) => Err((self.line, LineError::ZeroAction)),
            Ok(id) if w.bytes().all(|b| b.is_ascii_digit()) => Ok(ActionId(id)),
            _ => Err(self.unexpected(&token, "a label id (1..=65535)")),
        }
    }

    fn kind_value(&mut self) -> Located<LabelKind> {
        let token = self.expect_token("a label_type")?;
        let Token::Word(w) = token else {
            return Err(self.unexpected(&token, "a label_type"));
        };
        LabelKind::from_pbtxt(w).ok_or_else(|| {
            (
                self.line,
                LineError::UnknownLabelType { text: w.to_owned() },
            )
        })
    }

    fn unexpected(&self, token: &Token<'_>, expected: &'static str) -> (usize, LineError) {
        (
            self.line,
            LineError::UnexpectedToken {
                found: token.describe(),
                expected,
            },
        )
    }

    fn expect_token(&mut self, expected: &'static str) -> Located<Token<'a>> {
        self.next_token()?.ok_or((
            self.line,
            LineError::UnexpectedToken {
                found: "end of file".into(),
                expected,
            },
        ))
    }

    fn skip_space_and_comments(&mut self) {
        loop {
            let trimmed = self.rest.trim_start_matches(|c: char| {
                if c == '\n' {
                    self.line += 1;
                }
                c.is_whitespace()
            });
            self.rest = trimmed;
            if !self.rest.starts_with('#') {
                return;
            }
            let end = self.rest.find('\n').unwrap_or(self.rest.len());
            self.rest = &self.rest[end..];
        }
    }

    fn next_token(&mut self) -> Located<Option<Token<'a>>> {
        self.skip_space_and_comments();
        let Some(c) = self.rest.chars().next() else {
            return Ok(None);
        };
        let single = match c {
            '{' => Some(Token::Open),
            '}' => Some(Token::Close),
            ':' => Some(Token::Colon),
            _ => None,
        };
        if let Some(token) = single {
            self.rest = &self.rest[1..];
            return Ok(Some(token));
        }
        if c == '"' || c == '\'' {
            return self.string(c).map(|s| Some(Token::Str(s)));
        }
        let end = self
            .rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_.+-".contains(c)))
            .unwrap_or(self.rest.len());
        if end == 0 {
            return Err(self.unexpected(&Token::Word(&self.rest[..c.len_utf8()]), "a token"));
        }
        let (word, rest) = self.rest.split_at(end);
        self.rest = rest;
        Ok(Some(Token::Word(word)))
    }

    /// A quoted string with the common C escapes. Newlines inside are refused
    /// because protobuf text format does not allow them.
    fn string(&mut self, quote: char) -> Located<String> {
        let mut out = String::new();
        let mut chars = self.rest.char_indices().skip(1);
        let bad = |reason| (self.line, LineError::BadString { reason });
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.rest = &self.rest[i + 1..];
                    return Ok(out);
                }
                '\n' => return Err(bad("newline inside a string")),
                '\\' => {
                    let (_, e) = chars.next().ok_or_else(|| bad("unterminated string"))?;
                    out.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        '\\' | '"' | '\'' => e,
                        _ => return Err(bad("unsupported escape sequence")),
                    });
                }
                c => out.push(c),
            }
        }
        Err(bad("unterminated string"))
    }
}

fn duplicate(
    line: usize,
    what: &'static str,
    text: String,
    first_line: usize,
) -> (usize, LineError) {
    (
        line,
        LineError::Duplicate {
            what,
            text,
            first_line,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LabelMap, AnnotationError> {
        parse_label_map(text.as_bytes(), "map.pbtxt")
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn both_forms_on_one_line_or_many() {
        let map = parse(
            "label { name: \"talk to (e.g., self, a person, a group)\" label_id: 79 label_type: PERSON_INTERACTION }\n\
             label {\n  name: \"bend/bow (at the waist)\"\n\n  label_id:\n 1\n\tlabel_type: PERSON_MOVEMENT\n}\n",
        )
        .unwrap();
        assert_eq!(map.len(), 2);
        assert_eq!(
            map.name(ActionId(79)),
            Some("talk to (e.g., self, a person, a group)")
        );
        assert_eq!(
            map.get(ActionId(1)).unwrap().kind,
            Some(LabelKind::PersonMovement)
        );
        assert_eq!(map.ids().collect::<Vec<_>>(), [ActionId(79), ActionId(1)]);
        assert!(!map.contains(ActionId(2)));
        assert!(!map.contains(ActionId(500)));

        let map = parse("# comment\nitem { name: 'a \\\"b\\\"' id: 3 }").unwrap();
        assert_eq!(map.name(ActionId(3)), Some("a \"b\""));
        assert_eq!(map.get(ActionId(3)).unwrap().kind, None);
    }

    #[test]
    fn errors_name_file_line_and_problem() {
        assert_eq!(
            err("label {\n name: \"a\"\n label_id: 1\n label_type: JUMPING\n}"),
            "map.pbtxt:4: unknown label_type \"JUMPING\" (allowed: PERSON_MOVEMENT, OBJECT_MANIPULATION, PERSON_INTERACTION)"
        );
        assert_eq!(
            err("item {\n name: \"a\"\n}"),
            "map.pbtxt:1: the \"item\" entry starting here has no \"id\" field"
        );
        assert_eq!(
            err("item { name: \"a\" id: 1 }\nitem { name: \"b\" id: 1 }"),
            "map.pbtxt:2: duplicate label id \"1\" (first on line 1)"
        );
        assert_eq!(
            err("item { name: \"a\" id: 1 }\nitem { name: \"a\" id: 2 }"),
            "map.pbtxt:2: duplicate label name \"a\" (first on line 1)"
        );
        assert_eq!(
            err("item { name: \"a\" label_id: 1 }"),
            "map.pbtxt:1: unknown field \"label_id\" in a \"item\" entry (allowed: name, id)"
        );
        assert_eq!(
            err("item { name: \"a\" id: 1 id: 2 }"),
            "map.pbtxt:1: field \"id\" given twice in one entry"
        );
        assert_eq!(
            err("item { name: \"a\nb\" id: 1 }"),
            "map.pbtxt:1: bad string: newline inside a string"
        );
        assert_eq!(
            err("item { name: \"a\" id: x }"),
            "map.pbtxt:1: unexpected \"x\", expected a label id (1..=65535)"
        );
        assert_eq!(
            err("item { name: \"a\" id: 0 }"),
            "map.pbtxt:1: action id 0 is invalid: AVA action ids start at 1"
        );
        assert_eq!(
            err("\n\nitem { name: \"a\" id: 1 "),
            "map.pbtxt:3: unexpected end of file, expected a field name or '}'"
        );
        assert_eq!(
            err("labels { }"),
            "map.pbtxt:1: unexpected \"labels\", expected 'label' or 'item'"
        );
        assert_eq!(
            err("  \n# nothing\n"),
            "map.pbtxt: the label map file has no rows; an empty file here usually means a truncated or wrong download"
        );
        assert_eq!(
            parse_label_map(b"item { name: \"\xff\" id: 1 }", "m")
                .unwrap_err()
                .to_string(),
            "m:1: text is not valid UTF-8"
        );
    }

    #[test]
    fn serde_validates() {
        use serde::de::IntoDeserializer;
        use serde::de::value::{Error as DeError, SeqDeserializer};
        let labels = vec![
            Label {
                id: ActionId(1),
                name: "a".into(),
                kind: None,
            },
            Label {
                id: ActionId(1),
                name: "b".into(),
                kind: None,
            },
        ];
        assert_eq!(
            LabelMap::new(labels.clone()),
            Err(LabelMapError::DuplicateId(1))
        );
        let ok = LabelMap::new(labels[..1].to_vec()).unwrap();
        let back: Vec<Label> = ok.clone().into();
        assert_eq!(back, labels[..1]);
        // ActionId is transparent: it deserialises from a bare integer.
        let ids: SeqDeserializer<_, DeError> = vec![3u16, 4].into_deserializer();
        let parsed: Vec<ActionId> = Vec::deserialize(ids).unwrap();
        assert_eq!(parsed, [ActionId(3), ActionId(4)]);
    }
}
