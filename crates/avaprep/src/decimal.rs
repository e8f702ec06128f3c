//! Settings held as `f32`, written as the decimal they were given: TOML writes an `f32` through
//! the nearest `f64`, so a `label_iou` of 0.9 came back as 0.8999999761581421 in a run's
//! `config.toml`. JSON text already wrote the short form and still does; a stage key made
//! through `serde_json::Value` held the long one, so a `[report] min_score` such as 0.3 (not
//! 0.5, which binary holds exactly) keys its stage anew once: the report is drawn again.

use serde::Serializer;

/// `#[serde(serialize_with = "crate::decimal::shortest")]` on an `f32` field.
pub fn shortest<S: Serializer>(value: &f32, out: S) -> Result<S::Ok, S::Error> {
    let as_given: f64 = value
        .to_string()
        .parse()
        .expect("an f32's decimal parses as an f64");
    out.serialize_f64(as_given)
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    #[derive(Serialize)]
    struct Setting {
        #[serde(serialize_with = "super::shortest")]
        value: f32,
    }

    #[derive(Serialize)]
    struct PlainSetting {
        value: f32,
    }

    #[test]
    fn toml_and_json_show_the_decimal_given() {
        for value in [0.9_f32, 0.8, 0.5, 1.0, 0.0, 1e-7, 0.333_333_34, 123.25] {
            let toml = toml::to_string(&Setting { value }).unwrap();
            let read: f32 = toml.trim().trim_start_matches("value = ").parse().unwrap();
            assert_eq!(read, value, "{toml}");
            assert!(
                toml.len() <= "value = ".len() + value.to_string().len() + 3,
                "{toml}"
            );
            // JSON text is unchanged; a JSON value holds the decimal given, as the text does.
            assert_eq!(
                serde_json::to_string(&Setting { value }).unwrap(),
                serde_json::to_string(&PlainSetting { value }).unwrap()
            );
            let held = serde_json::to_value(Setting { value }).unwrap()["value"].as_f64();
            assert_eq!(held, Some(value.to_string().parse::<f64>().unwrap()));
        }
        assert_eq!(
            toml::to_string(&Setting { value: 0.9 }).unwrap().trim(),
            "value = 0.9"
        );
    }
}
