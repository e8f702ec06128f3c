//! `fetch-annotations`: the annotation zip (extracted), the name lists, the person-box tar
//! (extracted), all into the annotation folder PySlowFast reads.

use std::path::{Path, PathBuf};

use super::{Dataset, StageId};
use crate::annotations::plan::{Selection, file_name, plan_inputs};
use crate::fetch::archive;
use crate::fetch::download::{self, Downloader};
use crate::fetch::{FetchParams, content_identity, expected, fetch_file};
use crate::layout::DataLayout;
use crate::manifest::{DatasetManifest, RemoteFile};
use crate::pipeline::{ItemError, ItemRecord, Stage, StageContext};

pub struct FetchAnnotationsStage {
    pub manifest: DatasetManifest,
    pub params: FetchParams,
    /// Which annotation files a run needs when they come from disk.
    pub selection: Selection,
}

impl FetchAnnotationsStage {
    pub fn new(dataset: &Dataset) -> Self {
        FetchAnnotationsStage {
            manifest: dataset.manifest.clone(),
            params: dataset.fetch.clone(),
            selection: dataset.selection.clone(),
        }
    }

    /// The annotation files the plan needs, from a folder on disk into the annotation folder
    /// (nothing to copy when they are already there), checked against the sizes and sha256 the
    /// manifest knows. Returns the files' paths inside the annotation folder.
    fn copy_from_disk(&self, layout: &DataLayout) -> Result<Vec<PathBuf>, ItemError> {
        let annotations = layout.annotations();
        let source = self
            .params
            .annotations
            .clone()
            .unwrap_or(annotations.clone());
        let same_folder = match (source.canonicalize(), annotations.canonicalize()) {
            (Ok(source), Ok(destination)) => source == destination,
            _ => false,
        };
        let needed = plan_inputs(
            &self.manifest,
            &self.selection,
            self.params.videos_on_disk().as_ref(),
        );
        const NAME_IT: &str = "name the folder that holds them: `[fetch] annotations = \"DIR\"` in a pipeline, `--annotations DIR` for `extract --videos`";
        if !source.is_dir() {
            return Err(ItemError::input(format!(
                "{}: no such folder of annotation files; {NAME_IT}",
                source.display()
            )));
        }
        let mut files = Vec::new();
        for name in needed {
            let from = source.join(&name);
            let to = annotations.join(&name);
            if !from.is_file() {
                return Err(ItemError::input(format!(
                    "{}: not there; the annotation folder must hold every file the manifest names for the chosen splits ({name}); {NAME_IT}",
                    from.display()
                )));
            }
            let bytes = crate::fsutil::read_regular(&from, crate::fsutil::FileKind::Table)
                .map_err(|error| {
                    ItemError::input(format!("reading {}: {error}", from.display()))
                })?;
            // The bytes copied are the bytes checked: a file refused never replaces the copy
            // made before.
            if let Some((size, sha256)) = self
                .known_file(&name)
                .and_then(|known| unlike_known_bytes(&bytes, known))
            {
                return Err(ItemError::input(format!(
                    "{}: {size} bytes with sha256 {sha256}, not the official file the manifest lists; to use an edited file, copy the manifest and drop {name}'s line from its `contents` list",
                    from.display()
                )));
            }
            if !same_folder {
                crate::fsutil::write_atomic(&to, &bytes).map_err(ItemError::output)?;
            }
            files.push(PathBuf::from(name));
        }
        Ok(files)
    }

    /// What the manifest knows of an annotation file by its name, from the archive contents.
    fn known_file(&self, name: &str) -> Option<&crate::manifest::KnownFile> {
        let archives = self.manifest.annotations.iter().chain(&self.manifest.boxes);
        archives
            .flat_map(|archive| &archive.contents)
            .find(|known| known.name == name)
    }

    fn fetch_archive_and_extract(
        &self,
        downloader: &Downloader,
        layout: &DataLayout,
        file: &RemoteFile,
    ) -> Result<Vec<PathBuf>, ItemError> {
        let archive = layout.downloads().join(file_name(&file.path));
        fetch_file(
            downloader,
            layout,
            &self.manifest.urls(file),
            &archive,
            &expected(file),
            &|_, _| {},
        )
        .map_err(ItemError::download)?;
        let annotations = layout.annotations();
        // Members unlike the manifest's never replace the files there.
        let check = |members: &Path| check_known_contents(&archive, members, file);
        let written = if file.path.ends_with(".zip") {
            archive::extract_zip(&archive, &annotations, &check)
        } else {
            archive::extract_tar(&archive, &annotations, file.strip_prefix.as_deref(), &check)
        }
        .map_err(|error| ItemError::input(refused_archive(&archive, error)))?;
        Ok(written)
    }
}

/// An archive whose contents were refused is of no use, and were it kept, every later fetch
/// would find it downloaded and refuse the same bytes again: it goes, and the next fetch
/// downloads it anew (from a mirror put right). One that could not be written out stays.
fn refused_archive(archive: &Path, error: archive::ArchiveError) -> String {
    if matches!(error, archive::ArchiveError::Io { .. }) || std::fs::remove_file(archive).is_err() {
        return error.to_string();
    }
    format!("{error}; removed it from the downloads, so the next `avaprep fetch` downloads it anew")
}

/// The size and sha256 of a file when they are not those the manifest lists for it.
fn unlike_known(
    path: &Path,
    known: &crate::manifest::KnownFile,
) -> Result<Option<(u64, String)>, download::DownloadError> {
    let (size, sha256) = download::hash_file(path)?;
    Ok(unlike(size, sha256, known))
}

/// The size and sha256 of `bytes` when they are not those the manifest lists for the file.
fn unlike_known_bytes(bytes: &[u8], known: &crate::manifest::KnownFile) -> Option<(u64, String)> {
    use sha2::Digest as _;
    let sha256 = hex::encode(sha2::Sha256::digest(bytes));
    unlike(bytes.len() as u64, sha256, known)
}

fn unlike(size: u64, sha256: String, known: &crate::manifest::KnownFile) -> Option<(u64, String)> {
    let size_ok = known.size.is_none_or(|expected| expected == size);
    let sha_ok = known
        .sha256
        .as_ref()
        .is_none_or(|expected| expected.eq_ignore_ascii_case(&sha256));
    (!size_ok || !sha_ok).then_some((size, sha256))
}

/// The manifest's sizes and sha256 of archive members hold, in the folder they were extracted to.
fn check_known_contents(archive: &Path, folder: &Path, file: &RemoteFile) -> Result<(), String> {
    for known in &file.contents {
        let unlike = unlike_known(&folder.join(&known.name), known).map_err(|_| {
            format!(
                "{}: the archive has no member {} that the manifest lists",
                archive.display(),
                known.name
            )
        })?;
        if let Some((size, sha256)) = unlike {
            return Err(format!(
                "{}: member {} is {size} bytes with sha256 {sha256}, not what the manifest lists",
                archive.display(),
                known.name
            ));
        }
    }
    Ok(())
}

impl Stage for FetchAnnotationsStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::FetchAnnotations
    }

    fn depends_on(&self) -> &'static [StageId] {
        &[]
    }

    fn params(&self) -> serde_json::Value {
        let lists: Vec<_> = self
            .manifest
            .name_lists
            .values()
            .map(content_identity)
            .collect();
        serde_json::json!({
            "version": 1,
            "annotations": self.manifest.annotations.as_ref().map(content_identity),
            "name_lists": lists,
            "boxes": self.manifest.boxes.as_ref().map(content_identity),
            "on_disk": self.params.annotations_on_disk().then(|| serde_json::json!({
                "folder": self.params.annotations,
                "selection": self.selection,
                "videos_on_disk": self.params.videos.is_some(),
            })),
        })
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let files = if self.params.annotations_on_disk() {
            self.copy_from_disk(&layout)?
        } else {
            self.download(&layout, context.cancel)?
        };
        let bytes = files
            .iter()
            .map(|file| std::fs::metadata(layout.annotations().join(file)).map_or(0, |m| m.len()))
            .sum();
        let made: Vec<String> = files
            .iter()
            .map(|file| layout.relative(&layout.annotations().join(file)))
            .collect();
        let made: Vec<&str> = made.iter().map(String::as_str).collect();
        // Files copied from a folder of the user's are read again when they change there.
        let read: Vec<String> = match &self.params.annotations {
            Some(folder) if self.params.annotations_on_disk() => files
                .iter()
                .map(|file| folder.join(file).to_string_lossy().into_owned())
                .filter(|path| !Path::new(path).starts_with(layout.annotations()))
                .collect(),
            _ => Vec::new(),
        };
        let read: Vec<&str> = read.iter().map(String::as_str).collect();
        ItemRecord {
            files: files.len() as u64,
            bytes,
            ..ItemRecord::default()
        }
        .with_files(context.data_dir, &made, &read)
        .map_err(ItemError::input)
    }

    fn edits_belong(&self, data_dir: &Path) -> Option<String> {
        if let Some(folder) = &self.params.annotations
            && crate::layout::is_imported(folder)
        {
            return crate::layout::imported_edits_belong(folder, data_dir);
        }
        let source = match (&self.params.annotations, self.params.annotations_on_disk()) {
            (Some(folder), true) => format!("in {}, the folder they are copied from", folder.display()),
            _ => "in a folder of your own, named with `[fetch] annotations = \"DIR\"` (or `extract --annotations DIR`), with a dataset manifest that does not pin their checksums".to_string(),
        };
        Some(format!(
            "the data directory's annotations/ is a copy, made again from its source; edit annotations {source}"
        ))
    }
}

impl FetchAnnotationsStage {
    fn download(
        &self,
        layout: &DataLayout,
        cancel: &std::sync::atomic::AtomicBool,
    ) -> Result<Vec<PathBuf>, ItemError> {
        let downloader = Downloader::new(self.params.policy(), cancel).map_err(ItemError::input)?;
        let Some(annotations) = &self.manifest.annotations else {
            return Err(ItemError::usage(
                "the dataset names no annotation archive to download: name the folder of its annotation files (`--annotations DIR`, [fetch] annotations)".to_string(),
            ));
        };
        let mut files = self.fetch_archive_and_extract(&downloader, layout, annotations)?;
        if let Some(boxes) = &self.manifest.boxes {
            files.extend(self.fetch_archive_and_extract(&downloader, layout, boxes)?);
        }
        for list in self.manifest.name_lists.values() {
            let destination = layout.annotations().join(file_name(&list.path));
            fetch_file(
                &downloader,
                layout,
                &self.manifest.urls(list),
                &destination,
                &expected(list),
                &|_, _| {},
            )
            .map_err(ItemError::download)?;
            files.push(destination);
        }
        Ok(files)
    }
}
