//! `fetch-annotations`: the annotation zip (extracted), the name lists, the person-box tar
//! (extracted), all into the annotation folder PySlowFast reads.

use std::path::{Path, PathBuf};

use super::{StageId, item_error};
use crate::annotations::plan::file_name;
use crate::fetch::archive;
use crate::fetch::download::{self, Downloader};
use crate::fetch::{FetchParams, content_identity, expected, fetch_file};
use crate::layout::DataLayout;
use crate::manifest::{DatasetManifest, RemoteFile};
use crate::pipeline::{Granularity, ItemError, ItemRecord, Stage, StageContext, WHOLE};

pub struct FetchAnnotationsStage {
    pub manifest: DatasetManifest,
    pub params: FetchParams,
}

impl FetchAnnotationsStage {
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
        .map_err(item_error)?;
        let annotations = layout.annotations();
        let written = if file.path.ends_with(".zip") {
            archive::extract_zip(&archive, &annotations)
        } else {
            archive::extract_tar(&archive, &annotations, file.strip_prefix.as_deref())
        }
        .map_err(item_error)?;
        check_known_contents(&archive, &annotations, file)?;
        Ok(written)
    }
}

/// The manifest's sizes and sha256 of archive members hold after extraction.
fn check_known_contents(archive: &Path, folder: &Path, file: &RemoteFile) -> Result<(), ItemError> {
    for known in &file.contents {
        let path = folder.join(&known.name);
        let (size, sha256) = download::hash_file(&path).map_err(|_| {
            ItemError::new(format!(
                "{}: the archive has no member {} that the manifest lists",
                archive.display(),
                known.name
            ))
        })?;
        let size_ok = known.size.is_none_or(|expected| expected == size);
        let sha_ok = known
            .sha256
            .as_ref()
            .is_none_or(|expected| expected.eq_ignore_ascii_case(&sha256));
        if !size_ok || !sha_ok {
            return Err(ItemError::new(format!(
                "{}: member {} is {size} bytes with sha256 {sha256}, not what the manifest lists",
                archive.display(),
                known.name
            )));
        }
    }
    Ok(())
}

impl Stage for FetchAnnotationsStage {
    fn name(&self) -> &'static str {
        StageId::FetchAnnotations.name()
    }

    fn depends_on(&self) -> &'static [&'static str] {
        &[]
    }

    fn granularity(&self) -> Granularity {
        Granularity::Whole
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
            "annotations": content_identity(&self.manifest.annotations),
            "name_lists": lists,
            "boxes": self.manifest.boxes.as_ref().map(content_identity),
        })
    }

    fn plan(&self, _context: &StageContext) -> Result<Vec<String>, ItemError> {
        Ok(vec![WHOLE.to_string()])
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let downloader = Downloader::new(self.params.policy()).map_err(item_error)?;
        let mut files =
            self.fetch_archive_and_extract(&downloader, &layout, &self.manifest.annotations)?;
        if let Some(boxes) = &self.manifest.boxes {
            files.extend(self.fetch_archive_and_extract(&downloader, &layout, boxes)?);
        }
        for list in self.manifest.name_lists.values() {
            let destination = layout.annotations().join(file_name(&list.path));
            fetch_file(
                &downloader,
                &layout,
                &self.manifest.urls(list),
                &destination,
                &expected(list),
                &|_, _| {},
            )
            .map_err(item_error)?;
            files.push(destination);
        }
        let bytes = files
            .iter()
            .map(|file| std::fs::metadata(layout.annotations().join(file)).map_or(0, |m| m.len()))
            .sum();
        let made: Vec<String> = files
            .iter()
            .map(|file| layout.relative(&layout.annotations().join(file)))
            .collect();
        let made: Vec<&str> = made.iter().map(String::as_str).collect();
        ItemRecord {
            files: files.len() as u64,
            bytes,
            ..ItemRecord::default()
        }
        .with_files(context.data_dir, &made, &[])
        .map_err(item_error)
    }
}
