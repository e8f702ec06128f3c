//! A split's name ("train", "val", a dataset's own): checked once, where it is read from a flag, a
//! pipeline file or a trainer setting, so that every later use can put it in a file name.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::manifest::DatasetManifest;

/// A plain split name: letters, digits, `_` and `-` (it names files such as `train.csv`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SplitName(String);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{0}` is not a split name (letters, digits, `_` and `-`)")]
pub struct NotASplitName(String);

/// A split the dataset does not have, named with the ones it has.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("\"{split}\" is not a split of the dataset (it has: {})", known.join(", "))]
pub struct UnknownSplit {
    pub split: SplitName,
    pub known: Vec<String>,
}

impl SplitName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SplitName {
    type Error = NotASplitName;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        match plain {
            true => Ok(SplitName(name)),
            false => Err(NotASplitName(name)),
        }
    }
}

impl FromStr for SplitName {
    type Err = NotASplitName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        SplitName::try_from(name.to_string())
    }
}

impl From<SplitName> for String {
    fn from(split: SplitName) -> String {
        split.0
    }
}

impl Deref for SplitName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SplitName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for SplitName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for SplitName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for SplitName {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl DatasetManifest {
    /// The split `name` of the dataset.
    pub fn split(&self, name: &SplitName) -> Result<&crate::manifest::Split, UnknownSplit> {
        self.splits.get(name.as_str()).ok_or_else(|| UnknownSplit {
            split: name.clone(),
            known: self.splits.keys().cloned().collect(),
        })
    }

    /// The first of `splits` the dataset does not have, as an error.
    pub fn check_splits(&self, splits: &[SplitName]) -> Result<(), UnknownSplit> {
        splits
            .iter()
            .try_for_each(|name| self.split(name).map(drop))
    }
}

/// `val_split` in a trainer's settings: a split, or the empty string for none (a train-only
/// run), as `config.toml` has always written it.
pub mod optional {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::SplitName;

    pub fn serialize<S: Serializer>(split: &Option<SplitName>, out: S) -> Result<S::Ok, S::Error> {
        out.serialize_str(split.as_deref().unwrap_or(""))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<Option<SplitName>, D::Error> {
        let name = String::deserialize(input)?;
        match name.is_empty() {
            true => Ok(None),
            false => SplitName::try_from(name)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_name_is_plain_and_names_what_is_wrong() {
        assert_eq!("val".parse::<SplitName>().unwrap(), "val");
        assert_eq!("train_2-b".parse::<SplitName>().unwrap(), "train_2-b");
        for bad in ["", "../val", "a b", "val.csv"] {
            let error = bad.parse::<SplitName>().unwrap_err();
            assert!(error.to_string().contains(&format!("`{bad}`")), "{error}");
        }
        let from_toml: Result<Vec<SplitName>, _> =
            serde_json::from_str::<Vec<SplitName>>(r#"["train", "x/y"]"#);
        assert!(from_toml.unwrap_err().to_string().contains("`x/y`"));
    }

    #[test]
    fn an_empty_val_split_reads_as_none_and_writes_back_empty() {
        #[derive(Serialize, Deserialize)]
        struct Settings {
            #[serde(with = "optional")]
            val_split: Option<SplitName>,
        }
        let none: Settings = toml::from_str("val_split = \"\"").unwrap();
        assert_eq!(none.val_split, None);
        assert_eq!(toml::to_string(&none).unwrap().trim(), "val_split = \"\"");
        let val: Settings = toml::from_str("val_split = \"val\"").unwrap();
        assert_eq!(val.val_split.unwrap(), "val");
        assert!(toml::from_str::<Settings>("val_split = \"v/al\"").is_err());
    }
}
