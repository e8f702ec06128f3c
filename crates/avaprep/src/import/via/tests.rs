use super::*;
use crate::import::testdata;

fn read_text(text: &str, actions: &ActionSource) -> Result<Export, ExportError> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    read_via3(file.path(), actions, Browser::Chromium)
}

/// A one-video project with an `action` checkbox, a `person` text attribute, and these
/// metadata entries.
fn project(metadata: &str) -> String {
    format!(
        r#"{{"project":{{"vid_list":["1"]}},"config":{{}},
        "attribute":{{"1":{{"aname":"action","anchor_id":"FILE1_Z1_XY1","type":2,"desc":"",
        "options":{{"0":"fall","1":"fight"}},"default_option_id":""}},
        "2":{{"aname":"person","anchor_id":"FILE1_Z1_XY1","type":1,"desc":"","options":{{}},
        "default_option_id":""}}}},
        "file":{{"1":{{"fid":1,"fname":"clip25.mp4","type":4,"loc":1,"src":""}}}},
        "view":{{"1":{{"fid_list":[1]}}}},
        "metadata":{{{metadata}}}}}"#
    )
}

fn error_of(text: &str, actions: &ActionSource) -> String {
    read_text(text, actions).unwrap_err().to_string()
}

fn chromium(seconds: f64) -> At {
    At::PlayerSeconds(seconds, Browser::Chromium)
}

fn times(track: &Track) -> Vec<At> {
    track.shapes.iter().map(|shape| shape.at).collect()
}

fn actions_of(track: &Track) -> Vec<Vec<&str>> {
    track
        .shapes
        .iter()
        .map(|shape| shape.actions.iter().map(String::as_str).collect())
        .collect()
}

#[test]
fn boxes_and_a_temporal_segment_of_two_videos() {
    let path = testdata("via3_project.json");
    let export = read_via3(
        &path,
        &ActionSource::Attribute("action".into()),
        Browser::Chromium,
    )
    .unwrap();
    let [clip25, kitchen] = export.videos.as_slice() else {
        panic!("two videos: {:?}", export.videos);
    };
    assert_eq!(clip25.name, "clip25.mp4");
    assert_eq!(clip25.origin.place, "view \"1\"");
    assert_eq!(clip25.frame_size, None);

    // Person 3 is named by two boxes; the others are numbered in the file's order
    // (not the ids' sorted order), skipping 3.
    let people: Vec<u32> = clip25.tracks.iter().map(|track| track.person).collect();
    assert_eq!(people, [3, 1, 2]);
    assert!(
        clip25
            .tracks
            .iter()
            .all(|track| track.motion == Motion::Instant)
    );
    let named = &clip25.tracks[0];
    assert_eq!(named.origin.place, "metadata \"1_zQ3x9aLk\"");
    assert_eq!(times(named), [chromium(0.5), chromium(1.5)]);
    assert_eq!(actions_of(named), [vec!["stand"], vec!["talk", "wave"]]);
    assert_eq!(
        named.shapes[0].rect,
        Rect::Pixels([98.25, 50.0, 218.25, 300.0])
    );
    assert_eq!(
        named.shapes[1].rect,
        Rect::Pixels([100.5, 50.0, 220.5, 300.0])
    );
    assert_eq!(clip25.tracks[1].origin.place, "metadata \"1_aaaaaaaa\"");
    assert_eq!(actions_of(&clip25.tracks[1]), [Vec::<&str>::new()]);

    assert_eq!(kitchen.name, "kitchen.mp4");
    let [segment] = kitchen.tracks.as_slice() else {
        panic!("one segment: {:?}", kitchen.tracks);
    };
    assert_eq!(segment.person, 1);
    assert_eq!(segment.motion, Motion::Held);
    assert_eq!(times(segment), [chromium(2.5), chromium(6.0)]);
    assert!(
        segment
            .shapes
            .iter()
            .all(|shape| shape.rect == Rect::WholeFrame)
    );
    assert_eq!(
        segment
            .shapes
            .iter()
            .map(|shape| shape.outside)
            .collect::<Vec<_>>(),
        [false, true]
    );
    // The segment's attribute is not the one chosen.
    assert_eq!(actions_of(segment), [Vec::<&str>::new(), vec![]]);

    let by_activity = read_via3(
        &path,
        &ActionSource::Attribute("activity".into()),
        Browser::Chromium,
    )
    .unwrap();
    assert_eq!(
        actions_of(&by_activity.videos[1].tracks[0]),
        [vec!["cooking"], vec![]]
    );
    let by_checkboxes = read_via3(&path, &ActionSource::Checkboxes, Browser::Chromium).unwrap();
    assert_eq!(
        actions_of(&by_checkboxes.videos[0].tracks[0]),
        [vec!["stand"], vec!["talk", "wave"]]
    );
}

#[test]
fn label_reads_the_one_attribute_that_is_not_the_person() {
    let text = project(
        r#""1_b":{"vid":"1","flg":0,"z":[4.25],"xy":[2,10,20,30,40],"av":{"1":"1","2":"7"}}"#,
    );
    let export = read_text(&text, &ActionSource::Label).unwrap();
    let track = &export.videos[0].tracks[0];
    assert_eq!(track.person, 7);
    assert_eq!(times(track), [chromium(4.25)]);
    assert_eq!(actions_of(track), [vec!["fight"]]);
    assert_eq!(track.shapes[0].rect, Rect::Pixels([10.0, 20.0, 40.0, 60.0]));
}

#[test]
fn label_with_two_attributes_names_them_and_asks_for_one() {
    let message = error_of(
        &std::fs::read_to_string(testdata("via3_project.json")).unwrap(),
        &ActionSource::Label,
    );
    assert!(
        message.contains(": \"attribute\": several attributes"),
        "{message}"
    );
    assert!(message.contains("(\"action\", \"activity\")"), "{message}");
    assert!(message.contains("attribute option"), "{message}");
}

#[test]
fn an_attribute_the_project_lacks_is_an_error_listing_those_it_has() {
    let error = read_text(&project(""), &ActionSource::Attribute("verb".into())).unwrap_err();
    // The project is sound: the setting is the user's to change (exit 2).
    assert!(
        matches!(error, ExportError::ActionSetting { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("no attribute is named \"verb\"; expected one of \"action\", \"person\""),
        "{message}"
    );
}

#[test]
fn a_circle_is_an_error_naming_its_metadata() {
    let text = project(r#""1_circle1":{"vid":"1","flg":0,"z":[2],"xy":[3,50,50,10],"av":{}}"#);
    let message = error_of(&text, &ActionSource::Label);
    assert!(
        message.contains(": metadata \"1_circle1\": \"xy\" is a circle (shape 3)"),
        "{message}"
    );
    assert!(message.contains("only rectangles"), "{message}");
}

#[test]
fn malformed_metadata_names_its_id_and_what_was_expected() {
    for (metadata, what) in [
        (
            r#"{"vid":"1","z":[6,2.5],"xy":[],"av":{}}"#,
            "does not end after it starts",
        ),
        (
            r#"{"vid":"1","z":[2],"xy":[],"av":{}}"#,
            "expected a box (one time",
        ),
        (
            r#"{"vid":"1","z":[2],"xy":[2,1,2,3],"av":{}}"#,
            "has 4 numbers",
        ),
        (
            r#"{"vid":"1","z":[2],"xy":[2,1,2,-3,4],"av":{}}"#,
            "width and height 0 or more",
        ),
        (
            r#"{"vid":"1","z":["2"],"xy":[],"av":{}}"#,
            "\"z\" is [\"2\"]; expected an array of numbers",
        ),
        (
            r#"{"vid":"1","z":[-1],"xy":[2,1,2,3,4],"av":{}}"#,
            "0 or more",
        ),
        (
            r#"{"vid":"1","z":[2],"xy":[2,1,2,3,4],"av":{"1":"5"}}"#,
            "picks option \"5\"",
        ),
        (
            r#"{"vid":"9","z":[2],"xy":[2,1,2,3,4],"av":{}}"#,
            "\"vid\" \"9\" names no view",
        ),
        (
            r#"{"z":[2],"xy":[2,1,2,3,4],"av":{}}"#,
            "\"vid\" is missing",
        ),
    ] {
        let message = error_of(
            &project(&format!(r#""1_m":{metadata}"#)),
            &ActionSource::Label,
        );
        assert!(
            message.contains(": metadata \"1_m\": "),
            "{metadata}: {message}"
        );
        assert!(message.contains(what), "{metadata}: {message}");
    }
}

/// The JSON of other image tools is named as what it is, not as a VIA 3 project missing its
/// `"view"`.
#[test]
fn other_tools_json_is_named() {
    for (json, named) in [
        (
            r#"{"_via_settings":{},"_via_img_metadata":{"a.jpg1":{"filename":"a.jpg","regions":[]}}}"#,
            "a VIA 2 image project",
        ),
        (
            r#"{"a.jpg1":{"filename":"a.jpg","size":1,"regions":[],"file_attributes":{}}}"#,
            "VIA 1 or 2's annotations of images",
        ),
        (
            r#"{"images":[],"annotations":[],"categories":[{"id":1,"name":"person"}]}"#,
            "a COCO file",
        ),
    ] {
        let message = error_of(json, &ActionSource::Label);
        assert!(
            message.contains(&format!(
                ": the file: {named} (its boxes are on images), not a VIA 3 project"
            )),
            "{message}"
        );
    }
}

#[test]
fn json_syntax_errors_name_line_and_column() {
    let message = error_of(
        "{\"project\": {\n  \"vid_list\": [\"1\",]\n}}",
        &ActionSource::Label,
    );
    assert!(
        message.contains(": line 2, column 20: not JSON"),
        "{message}"
    );
    let message = error_of("[]", &ActionSource::Label);
    assert!(
        message.contains(": the file: expected a VIA 3 project"),
        "{message}"
    );
    let message = error_of(
        r#"{"attribute":{},"file":{},"view":{}}"#,
        &ActionSource::Label,
    );
    assert!(
        message.contains(": \"metadata\": missing or not an object"),
        "{message}"
    );
}

#[test]
fn two_boxes_of_one_person_at_one_time_are_an_error() {
    let text = project(
        r#""1_a":{"vid":"1","z":[2],"xy":[2,1,2,3,4],"av":{"2":"1"}},
           "1_b":{"vid":"1","z":[2],"xy":[2,5,2,3,4],"av":{"2":"1"}}"#,
    );
    let message = error_of(&text, &ActionSource::Label);
    let expected = ": metadata \"1_b\": a second box of person 1 at 2 s (the first is \
                    metadata \"1_a\")";
    assert!(message.contains(expected), "{message}");
}
