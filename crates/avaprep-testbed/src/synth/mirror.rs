//! The download-mirror tree: same relative paths as the official hosts, so a downloader
//! works against it by changing only its base URL. Every file is written under a temporary
//! name and renamed, so a reader never sees a half-written file.

use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::annotations::AnnotationTexts;
use super::plan::{DatasetPlan, Split, VideoSpec};
use super::{MirrorFile, SynthError};

pub const ZIP_PATH: &str = "ava-dataset/annotations/ava_v2.2.zip";
pub const TRAINVAL_NAMES: &str = "ava-dataset/annotations/ava_file_names_trainval_v2.1.txt";
pub const TEST_NAMES: &str = "ava-dataset/annotations/ava_file_names_test_v2.1.txt";
pub const SLOWFAST_TAR: &str = "pyslowfast/annotation/ava/ava_annotations.tar";
pub const TAR_TOP: &str = "ava_annotations/";
pub const TAR_BOX_DIR: &str = "ava_annotations/person_box_67091280_iou90/";
pub const DET_VAL: &str = "ava_detection_val_boxes_and_labels.csv";
pub const DET_TRAIN: &str = "ava_detection_train_boxes_and_labels_include_negative_v2.2.csv";

/// Fixed modification time for archive members (2019-01-01), so archives are reproducible.
const ARCHIVE_MTIME: u64 = 1_546_300_800;

pub struct Layout {
    root: PathBuf,
}

pub fn video_rel_path(spec: &VideoSpec) -> String {
    let dir = if spec.split == Split::Test {
        "test"
    } else {
        "trainval"
    };
    format!("ava-dataset/{dir}/{}", spec.file_name())
}

pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SynthError> {
    avaprep::fsutil::write_atomic(path, bytes).map_err(|e| SynthError::io(path, e))
}

impl Layout {
    pub fn new(root: &Path) -> Self {
        Layout {
            root: root.to_path_buf(),
        }
    }

    pub fn create_dirs(&self) -> Result<(), SynthError> {
        for dir in [
            "ava-dataset/annotations",
            "ava-dataset/trainval",
            "ava-dataset/test",
            "pyslowfast/annotation/ava",
        ] {
            let p = self.root.join(dir);
            std::fs::create_dir_all(&p).map_err(|e| SynthError::io(&p, e))?;
        }
        Ok(())
    }

    pub fn video_path(&self, spec: &VideoSpec) -> PathBuf {
        self.root.join(video_rel_path(spec))
    }
}

/// Writes the annotation zip, name lists and SlowFast tar, then lists every mirror file.
pub fn write_annotations(
    layout: &Layout,
    plan: &DatasetPlan,
    texts: &AnnotationTexts,
) -> Result<Vec<MirrorFile>, SynthError> {
    let root = &layout.root;
    let zip_path = root.join(ZIP_PATH);
    write_atomic(&zip_path, &zip_bytes(&texts.files, &zip_path)?)?;
    write_atomic(&root.join(TRAINVAL_NAMES), texts.trainval_names.as_bytes())?;
    write_atomic(&root.join(TEST_NAMES), texts.test_names.as_bytes())?;
    let tar_path = root.join(SLOWFAST_TAR);
    let tar = tar_bytes(texts).map_err(|e| SynthError::io(&tar_path, e))?;
    write_atomic(&tar_path, &tar)?;

    let mut rel: Vec<String> = plan.videos.iter().map(video_rel_path).collect();
    rel.extend([ZIP_PATH, TRAINVAL_NAMES, TEST_NAMES, SLOWFAST_TAR].map(String::from));
    rel.sort();
    rel.into_iter().map(|r| describe(root, r)).collect()
}

fn describe(root: &Path, rel: String) -> Result<MirrorFile, SynthError> {
    let path = root.join(&rel);
    let (size, sha256) = sha256_file(&path).map_err(|e| SynthError::io(&path, e))?;
    Ok(MirrorFile {
        path: rel,
        size,
        sha256,
    })
}

pub fn sha256_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut f = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((size, hex::encode(hasher.finalize())))
}

/// The annotation zip: the files at its root, no folder, as the official one.
fn zip_bytes(files: &[(&str, String)], path: &Path) -> Result<Vec<u8>, SynthError> {
    let zerr = |source| SynthError::Zip {
        path: path.to_path_buf(),
        source,
    };
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for (name, text) in files {
        zip.start_file(*name, options).map_err(zerr)?;
        zip.write_all(text.as_bytes())
            .map_err(|e| SynthError::io(path, e))?;
    }
    Ok(zip.finish().map_err(zerr)?.into_inner())
}

fn tar_bytes(texts: &AnnotationTexts) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    for dir in [TAR_TOP, TAR_BOX_DIR] {
        let mut h = tar_header(tar::EntryType::Directory, 0, 0o755);
        tar.append_data(&mut h, dir, std::io::empty())?;
    }
    for (name, text) in [(DET_VAL, &texts.det_val), (DET_TRAIN, &texts.det_train)] {
        let mut h = tar_header(tar::EntryType::Regular, text.len() as u64, 0o644);
        tar.append_data(&mut h, format!("{TAR_BOX_DIR}{name}"), text.as_bytes())?;
    }
    tar.into_inner()
}

fn tar_header(kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(ARCHIVE_MTIME);
    h.set_uid(0);
    h.set_gid(0);
    h
}
