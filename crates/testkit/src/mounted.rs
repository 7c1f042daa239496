//! A directory laid out like a kubelet ConfigMap/Secret volume, for the tests
//! that reload what is mounted (`tests/`, `e2e/`).

use std::path::{Path, PathBuf};

/// `name -> ..data/name`, `..data -> ..<generation>/`; an update writes a new
/// generation and swaps `..data` in one rename, as the kubelet does.
pub struct MountedDir {
    dir: PathBuf,
    generation: usize,
}

impl MountedDir {
    pub fn new(dir: &Path, files: &[(&str, &[u8])]) -> Self {
        std::fs::create_dir_all(dir).expect("mount dir");
        let mut mounted = Self {
            dir: dir.to_owned(),
            generation: 0,
        };
        mounted.update(files);
        for (name, _) in files {
            std::os::unix::fs::symlink(Path::new("..data").join(name), dir.join(name)).expect("file symlink");
        }
        mounted
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes a new generation and swaps `..data` to it in one rename.
    pub fn update(&mut self, files: &[(&str, &[u8])]) {
        self.generation += 1;
        let generation = format!("..2026_11_29_10_00_{:02}.{}", self.generation, self.generation);
        let target = self.dir.join(&generation);
        std::fs::create_dir_all(&target).expect("generation dir");
        for (name, content) in files {
            std::fs::write(target.join(name), content).expect("write file");
        }
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&generation, &tmp).expect("..data_tmp symlink");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("atomic ..data swap");
    }
}
