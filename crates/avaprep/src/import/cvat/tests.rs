use super::*;
use crate::import::export::{At, FrameSize, Rect, Shape};
use crate::import::testdata;
use std::io::Write;

fn read_bytes(bytes: &[u8], actions: &ActionSource) -> Result<Export, ExportError> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), bytes).unwrap();
    read_cvat(file.path(), actions)
}

fn error_of(xml: &str) -> String {
    read_bytes(xml.as_bytes(), &ActionSource::Label)
        .unwrap_err()
        .to_string()
}

fn frames(track: &Track) -> Vec<At> {
    track.shapes.iter().map(|shape| shape.at).collect()
}

fn actions_of(track: &Track) -> Vec<Vec<String>> {
    track
        .shapes
        .iter()
        .map(|shape| shape.actions.clone())
        .collect()
}

fn strings(lists: &[&[&str]]) -> Vec<Vec<String>> {
    lists
        .iter()
        .map(|list| list.iter().map(|item| item.to_string()).collect())
        .collect()
}

fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    for (name, bytes) in members {
        zip.start_file(*name, options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

#[test]
fn a_video_track_is_interpolated_with_outside_and_actions_from_label_attribute_or_checkboxes() {
    let path = testdata("cvat_video.xml");
    let export = read_cvat(&path, &ActionSource::Label).unwrap();
    let [video] = export.videos.as_slice() else {
        panic!("one video: {:?}", export.videos);
    };
    assert_eq!(video.name, "clip25.mp4");
    assert_eq!(
        video.frame_size,
        Some(FrameSize {
            width: 1280,
            height: 720
        })
    );
    // start_frame is 30, and the boxes' frames (30 to 35) already count from frame 0.
    assert_eq!(video.origin.place, "line 5, <task>");
    let [walker, second] = video.tracks.as_slice() else {
        panic!("two tracks: {:?}", video.tracks);
    };

    // Track ids 0 and 1 are persons 1 and 2; frames are as CVAT wrote them.
    assert_eq!(walker.person, 1);
    assert_eq!(walker.motion, Motion::Interpolated);
    assert_eq!(walker.origin.place, "line 71, <track id=\"0\">");
    assert_eq!(frames(walker), [30, 31, 32, 33].map(At::Frame));
    assert_eq!(
        walker.shapes[0].rect,
        Rect::Pixels([100.0, 50.0, 200.0, 300.0])
    );
    assert_eq!(
        walker.shapes[1].rect,
        Rect::Pixels([110.0, 50.0, 210.0, 300.0])
    );
    let outside: Vec<bool> = walker.shapes.iter().map(|shape| shape.outside).collect();
    assert_eq!(outside, [false, false, false, true]);
    assert_eq!(actions_of(walker), strings(&[&["person"] as &[&str]; 4]));
    assert_eq!(second.person, 2);
    assert_eq!(frames(second), [34, 35].map(At::Frame));
    // Corners as written: clipping to the frame happens later.
    assert_eq!(
        second.shapes[0].rect,
        Rect::Pixels([-4.5, 10.25, 640.0, 719.99])
    );

    let by_attribute = read_cvat(&path, &ActionSource::Attribute("action".into())).unwrap();
    let tracks = &by_attribute.videos[0].tracks;
    assert_eq!(
        actions_of(&tracks[0]),
        strings(&[&["walk"], &["walk"], &["sit"], &["sit"]])
    );
    // An empty value is no action.
    assert_eq!(actions_of(&tracks[1]), strings(&[&[], &["stand"]]));

    let by_checkbox = read_cvat(&path, &ActionSource::Checkboxes).unwrap();
    let tracks = &by_checkbox.videos[0].tracks;
    assert_eq!(
        actions_of(&tracks[0]),
        strings(&[&["talk"], &["talk"], &["talk", "wave"], &[]])
    );
    assert_eq!(actions_of(&tracks[1]), strings(&[&[], &[]]));
}

#[test]
fn a_zipped_export_is_read_from_its_xml_member() {
    let xml = std::fs::read(testdata("cvat_video.xml")).unwrap();
    let zip = zip_of(&[
        ("images/frame_000030.PNG", b"\x89PNG"),
        ("annotations.xml", &xml),
    ]);
    let file = tempfile::Builder::new().suffix(".zip").tempfile().unwrap();
    std::fs::write(file.path(), &zip).unwrap();
    let zipped = read_cvat(file.path(), &ActionSource::Label).unwrap();
    let bare = read_cvat(&testdata("cvat_video.xml"), &ActionSource::Label).unwrap();

    let video = &zipped.videos[0];
    assert_eq!(video.origin.file, file.path().join("annotations.xml"));
    assert_eq!(video.name, bare.videos[0].name);
    let shapes = |export: &Export| -> Vec<Vec<Shape>> {
        export.videos[0]
            .tracks
            .iter()
            .map(|track| track.shapes.clone())
            .collect()
    };
    assert_eq!(shapes(&zipped), shapes(&bare));
}

#[test]
fn a_zip_without_one_xml_file_is_an_error() {
    let none = zip_of(&[("images/frame_000000.PNG", b"\x89PNG")]);
    let message = read_bytes(&none, &ActionSource::Label)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(": the zip: holds no .xml file"),
        "{message}"
    );

    let two = zip_of(&[("a.xml", b"<annotations/>"), ("b.xml", b"<annotations/>")]);
    let message = read_bytes(&two, &ActionSource::Label)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("several .xml files (a.xml, b.xml)"),
        "{message}"
    );
}

#[test]
fn a_project_export_groups_tracks_by_task_and_takes_off_the_frame_offsets() {
    let export = read_cvat(&testdata("cvat_project_video.xml"), &ActionSource::Label).unwrap();
    let names: Vec<&str> = export
        .videos
        .iter()
        .map(|video| video.name.as_str())
        .collect();
    assert_eq!(names, ["clip31.mp4", "clip25.mp4", "kitchen.mp4"]);
    let [clip31, clip25, kitchen] = export.videos.as_slice() else {
        unreachable!()
    };
    // The first task of each subset is numbered from 0.
    assert_eq!(frames(&clip31.tracks[0]), [5, 6].map(At::Frame));
    assert_eq!(frames(&clip25.tracks[0]), [40].map(At::Frame));
    // After clip25's 100 frames in subset "default": 110 is kitchen's frame 10.
    assert_eq!(frames(&kitchen.tracks[0]), [10, 12, 14].map(At::Frame));
    assert_eq!(
        kitchen.frame_size,
        Some(FrameSize {
            width: 1920,
            height: 1080
        })
    );
    assert_eq!(kitchen.tracks[0].person, 3);
    assert_eq!(
        actions_of(&kitchen.tracks[0]),
        strings(&[&["cook"] as &[&str]; 3])
    );
}

#[test]
fn a_tracks_shapes_are_sorted_by_frame_and_a_repeated_shape_counts_once() {
    let xml = "<annotations>\n<meta><task><name>clip</name></task></meta>\n\
        <track id=\"4\" label=\"run\">\n\
        <box frame=\"9\" outside=\"1\" xtl=\"1\" ytl=\"2\" xbr=\"3\" ybr=\"4\"/>\n\
        <box frame=\"2\" outside=\"0\" xtl=\"1\" ytl=\"2\" xbr=\"3\" ybr=\"4\"/>\n\
        <box frame=\"9\" outside=\"1\" xtl=\"1\" ytl=\"2\" xbr=\"3\" ybr=\"4\"/>\n\
        </track>\n</annotations>\n";
    let export = read_bytes(xml.as_bytes(), &ActionSource::Label).unwrap();
    let video = &export.videos[0];
    // No <source>: the task's name names the video.
    assert_eq!(video.name, "clip");
    assert_eq!(video.tracks[0].person, 5);
    assert_eq!(frames(&video.tracks[0]), [2, 9].map(At::Frame));

    let clash = xml.replacen("outside=\"1\" xtl=\"1\"", "outside=\"0\" xtl=\"1\"", 1);
    let message = error_of(&clash);
    assert!(
        message.contains("line 3, <track id=\"4\">: two different boxes at frame 9"),
        "{message}"
    );
}

#[test]
fn images_of_two_videos_become_instant_tracks_by_person() {
    let export = read_cvat(&testdata("cvat_images.xml"), &ActionSource::Label).unwrap();
    let [clip25, clip31] = export.videos.as_slice() else {
        panic!("two videos: {:?}", export.videos);
    };
    assert_eq!(clip25.name, "clip25");
    assert_eq!(
        clip25.frame_size,
        Some(FrameSize {
            width: 1280,
            height: 720
        })
    );
    // Person 2 is the second box of its image (its person attribute is empty); person 4 is
    // named by the attribute, on two images.
    let people: Vec<u32> = clip25.tracks.iter().map(|track| track.person).collect();
    assert_eq!(people, [2, 4]);
    assert!(
        clip25
            .tracks
            .iter()
            .all(|track| track.motion == Motion::Instant)
    );
    assert_eq!(frames(&clip25.tracks[0]), [At::Seconds(12.0)]);
    assert_eq!(
        frames(&clip25.tracks[1]),
        [At::Seconds(12.0), At::Seconds(13.0)]
    );
    assert_eq!(
        actions_of(&clip25.tracks[1]),
        strings(&[&["talk"], &["walk"]])
    );
    assert_eq!(
        clip25.tracks[0].shapes[0].rect,
        Rect::Pixels([700.0, 80.0, 820.0, 400.0])
    );

    assert_eq!(clip31.name, "clip31");
    assert_eq!(
        clip31.frame_size,
        Some(FrameSize {
            width: 640,
            height: 360
        })
    );
    assert_eq!(clip31.tracks.len(), 1);
    assert_eq!(clip31.tracks[0].person, 1);
    assert_eq!(frames(&clip31.tracks[0]), [At::Seconds(2.0)]);

    let by_person = read_cvat(
        &testdata("cvat_images.xml"),
        &ActionSource::Attribute("person".into()),
    )
    .unwrap();
    assert_eq!(
        actions_of(&by_person.videos[0].tracks[1]),
        strings(&[&["4"], &["4"]])
    );
}

#[test]
fn image_names_say_the_video_and_the_second() {
    assert_eq!(
        image_instant("clip25/000012.jpg"),
        Some(("clip25".into(), 12))
    );
    assert_eq!(
        image_instant("clip25_000012.jpg"),
        Some(("clip25".into(), 12))
    );
    assert_eq!(
        image_instant("my_clip_0007.png"),
        Some(("my_clip".into(), 7))
    );
    assert_eq!(
        image_instant("videos/clip25/img_902"),
        Some(("videos/clip25".into(), 902))
    );
    for bad in [
        "clip25/cover.jpg",
        "clip25.jpg",
        "_12.jpg",
        "clip25_12a.jpg",
        "/12.jpg",
    ] {
        assert_eq!(image_instant(bad), None, "{bad}");
    }
}

#[test]
fn frame_filters_set_the_step() {
    assert_eq!(frame_step(""), 1);
    assert_eq!(frame_step("step=5"), 5);
    assert_eq!(frame_step("step = 12"), 12);
    assert_eq!(frame_step("step=0"), 1);
}

#[test]
fn text_that_is_not_xml_is_an_error_naming_the_line() {
    let message = error_of("video,start_frame,label\nclip25,0,stand\n");
    assert!(message.contains(": line 1: not XML"), "{message}");
    let message = error_of("<annotations>\n<track id=\"0\">\n</annotations>\n");
    assert!(message.contains(": line 3: not XML"), "{message}");
    // Cut short: named at its last line, as cut, not at line 1.
    let message = error_of(
        "<?xml version=\"1.0\"?>\n<annotations>\n  <version>1.1</version>\n  <track id=\"0\">\n",
    );
    assert!(
        message.contains(": line 4: the file ends here, before its root element closes"),
        "{message}"
    );
    assert!(
        message.contains("cut short; copy or export it again"),
        "{message}"
    );
    let message = error_of("<?xml version=\"1.0\"?>\n<dataset/>\n");
    assert!(
        message.contains("line 2, <dataset>: expected CVAT's <annotations>"),
        "{message}"
    );
}

#[test]
fn a_box_missing_a_corner_names_the_box_and_its_line() {
    let message = error_of(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<annotations>\n\
         <meta><task><name>clip</name></task></meta>\n<track id=\"0\" label=\"person\">\n\
         <box frame=\"3\" outside=\"0\" ytl=\"1\" xbr=\"2\" ybr=\"3\"/>\n\
         </track>\n</annotations>\n",
    );
    assert!(
        message.contains("line 5, <box frame=\"3\">: xtl is missing; expected a number"),
        "{message}"
    );
}

#[test]
fn bad_corners_and_numbers_name_the_box() {
    let track = |box_attributes: &str| {
        format!(
            "<annotations>\n<meta><task><name>clip</name></task></meta>\n\
             <track id=\"0\" label=\"person\">\n<box frame=\"1\" {box_attributes}/>\n</track>\n\
             </annotations>\n"
        )
    };
    for (attributes, what) in [
        ("xtl=\"9\" ytl=\"1\" xbr=\"2\" ybr=\"3\"", "are swapped"),
        (
            "xtl=\"a\" ytl=\"1\" xbr=\"2\" ybr=\"3\"",
            "xtl=\"a\" is not a number",
        ),
        (
            "xtl=\"1\" ytl=\"1\" xbr=\"2\" ybr=\"NaN\"",
            "ybr=\"NaN\" is not a number",
        ),
        (
            "outside=\"2\" xtl=\"1\" ytl=\"1\" xbr=\"2\" ybr=\"3\"",
            "outside=\"2\" is not a flag",
        ),
        (
            "xtl=\"1\" ytl=\"1\" xbr=\"2\" ybr=\"3\" rotation=\"30.00\"",
            "only upright boxes",
        ),
    ] {
        let message = error_of(&track(attributes));
        assert!(
            message.contains("line 4, <box frame=\"1\">: "),
            "{attributes}: {message}"
        );
        assert!(message.contains(what), "{attributes}: {message}");
    }
}

#[test]
fn a_polygon_track_is_an_error_naming_the_track() {
    let message = error_of(
        "<annotations>\n<meta><task><name>clip</name></task></meta>\n\
         <track id=\"7\" label=\"person\">\n\
         <polygon frame=\"0\" outside=\"0\" occluded=\"0\" keyframe=\"1\" \
         points=\"1,2;3,4;5,6\"/>\n\
         </track>\n</annotations>\n",
    );
    assert!(
        message.contains("line 3, <track id=\"7\">: a track of <polygon> shapes"),
        "{message}"
    );
    assert!(message.contains("only boxes are read"), "{message}");
}

#[test]
fn an_image_name_without_digits_is_an_error_naming_the_image() {
    let message = error_of(
        "<annotations>\n<meta><task><name>keyframes</name></task></meta>\n\
         <image id=\"0\" name=\"clip25/cover.jpg\" width=\"640\" height=\"360\">\n</image>\n\
         </annotations>\n",
    );
    assert!(
        message.contains("line 3, <image id=\"0\">: the name does not say"),
        "{message}"
    );
    assert!(message.contains("clip25/000012.jpg"), "{message}");
}

#[test]
fn images_of_one_video_with_two_sizes_are_an_error() {
    let message = error_of(
        "<annotations>\n\
         <image id=\"0\" name=\"clip25/000001.jpg\" width=\"640\" height=\"360\"/>\n\
         <image id=\"1\" name=\"clip25/000002.jpg\" width=\"1280\" height=\"720\"/>\n\
         </annotations>\n",
    );
    assert!(
        message.contains("line 3, <image id=\"1\">: is 1280×720 but line 2"),
        "{message}"
    );
}

#[test]
fn a_video_task_exported_for_images_is_an_error() {
    let message = error_of(
        "<annotations>\n<meta><task><name>clip25</name><original_size><width>640</width>\
         <height>360</height></original_size><source>clip25.mp4</source></task></meta>\n\
         <image id=\"0\" name=\"frame_000000\" width=\"640\" height=\"360\"/>\n\
         </annotations>\n",
    );
    assert!(
        message.contains("line 3, <image id=\"0\">: a frame of a video task"),
        "{message}"
    );
    assert!(message.contains("CVAT for video 1.1"), "{message}");
}

#[test]
fn an_attribute_the_export_lacks_is_an_error_listing_those_it_has() {
    let error = read_cvat(
        &testdata("cvat_video.xml"),
        &ActionSource::Attribute("Action".into()),
    )
    .unwrap_err();
    // The file is sound: the setting is the user's to change (exit 2).
    assert!(
        matches!(error, ExportError::ActionSetting { .. }),
        "{error:?}"
    );
    let error = error.to_string();
    assert!(
        error.contains("no attribute is named \"Action\" (it has action, talk, wave)"),
        "{error}"
    );
}

#[test]
fn project_tracks_must_name_a_task_of_the_project() {
    let xml = std::fs::read_to_string(testdata("cvat_project_video.xml")).unwrap();
    let message = error_of(&xml.replace(" task_id=\"5\"", ""));
    assert!(
        message.contains("<track id=\"2\">: no task_id"),
        "{message}"
    );
    let message = error_of(&xml.replace(" task_id=\"5\"", " task_id=\"9\""));
    assert!(message.contains("task_id=\"9\" names no task"), "{message}");
}

#[test]
fn a_job_export_names_no_video() {
    let message = error_of(
        "<annotations>\n<meta>\n<job><id>21</id><start_frame>0</start_frame></job>\n</meta>\n\
         <track id=\"0\" label=\"person\">\n\
         <box frame=\"0\" xtl=\"1\" ytl=\"1\" xbr=\"2\" ybr=\"2\"/>\n\
         </track>\n</annotations>\n",
    );
    assert!(
        message.contains("line 3, <job>: names no video"),
        "{message}"
    );
}
