//! The pod decoder of the admission path: serde seeds that read an AdmissionReview's pod (or a
//! DaemonSet's pod template) straight into the engine's [`Pod`], skipping every field placement does
//! not read as JSON syntax ([`IgnoredAny`]), and name the field a refused value was in ([`Trail`]).

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use pod_director_engine::placement::{Pod, PodMetadata, PodSpec};

/// Where decoding is, for error messages: the field being read when a value
/// was refused, as a prefix (`""`, `"spec.template."`) and the field's path
/// under it (`"spec.tolerations"`). Set as fields are entered and restored
/// as they end, so after an error it names the innermost field that was being read.
#[derive(Debug, Default)]
pub(crate) struct Trail {
    at: Cell<(&'static str, &'static str)>,
}

impl Trail {
    /// Back at the top of an object (before an object is read again).
    pub(crate) fn reset(&self) {
        self.at.set(("", ""));
    }

    /// The path of the field last entered (`spec.tolerations`), empty at the top of the object.
    pub(crate) fn path(&self) -> String {
        let (prefix, field) = self.at.get();
        match (prefix, field) {
            (_, "") => prefix.trim_end_matches('.').to_owned(),
            _ => format!("{prefix}{field}"),
        }
    }

    /// Reads the next map value with `seed`, recording `field` while it is read.
    fn read<'de, A, S>(
        &self,
        map: &mut A,
        prefix: &'static str,
        field: &'static str,
        seed: S,
    ) -> Result<S::Value, A::Error>
    where
        A: MapAccess<'de>,
        S: DeserializeSeed<'de>,
    {
        let outer = self.at.replace((prefix, field));
        let value = map.next_value_seed(seed)?;
        self.at.set(outer);
        Ok(value)
    }

    /// [`Trail::read`] of a plain value.
    fn value<'de, A, T>(&self, map: &mut A, prefix: &'static str, field: &'static str) -> Result<T, A::Error>
    where
        A: MapAccess<'de>,
        T: Deserialize<'de>,
    {
        self.read(map, prefix, field, std::marker::PhantomData::<T>)
    }
}

/// `null` or the seed's value.
pub(crate) struct Nullable<S>(pub S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Nullable<S> {
    type Value = Option<S::Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Nullable<S> {
    type Value = Option<S::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(deserializer).map(Some)
    }
}

/// A string that must equal `.0` (an object's `apiVersion` or `kind`); read without copying it.
struct Expect(&'static str);

impl<'de> DeserializeSeed<'de> for Expect {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Expect {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<(), E> {
        if value == self.0 {
            Ok(())
        } else {
            Err(E::invalid_value(de::Unexpected::Str(value), &self))
        }
    }
}

/// Decodes a [`Pod`] (`apiVersion` `v1` and `kind` `Pod` when present),
/// recording in `trail` where it is; `prefix` is the pod's place in the
/// object (`""` for a pod).
pub(crate) struct PodSeed<'t> {
    pub trail: &'t Trail,
    /// Checks `apiVersion` and `kind` (a pod object; a template has neither).
    pub typed: bool,
    /// How the QoS class's fields are read (see [`super::Reading`]); none: skipped unread.
    pub qos: Option<&'t Qos>,
    /// Where the pod is in the object: `""`, or `"spec.template."`.
    pub prefix: &'static str,
    pub metadata: &'static str,
    pub spec: &'static str,
}

impl<'t> PodSeed<'t> {
    /// A pod object, its QoS class's fields read when `reading` says so.
    pub(super) fn pod(reading: &'t super::Reading) -> Self {
        Self {
            trail: &reading.trail,
            typed: true,
            qos: reading.qos(),
            prefix: "",
            metadata: "metadata.",
            spec: "spec.",
        }
    }

    /// A DaemonSet's `spec.template`.
    pub(crate) fn daemon_set_template(trail: &'t Trail) -> Self {
        Self {
            trail,
            typed: false,
            // The in-tree plugins decide pods, not DaemonSets.
            qos: None,
            prefix: "spec.template.",
            metadata: "spec.template.metadata.",
            spec: "spec.template.spec.",
        }
    }
}

impl<'de> DeserializeSeed<'de> for PodSeed<'_> {
    type Value = Pod;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Pod, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PodSeed<'_> {
    type Value = Pod;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.typed {
            "a v1 Pod object"
        } else {
            "a pod template object"
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pod, A::Error> {
        let trail = self.trail;
        let prefix = self.prefix;
        let mut pod = Pod::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                "apiVersion" if self.typed => trail.read(&mut map, prefix, "apiVersion", Expect("v1"))?,
                "kind" if self.typed => trail.read(&mut map, prefix, "kind", Expect("Pod"))?,
                "metadata" => {
                    let seed = Nullable(MetadataSeed {
                        trail,
                        prefix: self.metadata,
                    });
                    pod.metadata = trail.read(&mut map, prefix, "metadata", seed)?.unwrap_or_default();
                }
                "spec" => {
                    let seed = Nullable(SpecSeed {
                        trail,
                        prefix: self.spec,
                        qos: self.qos,
                    });
                    pod.spec = trail.read(&mut map, prefix, "spec", seed)?;
                }
                "status" if self.typed => {
                    let status: Option<QosStatus> = Qos::read(self.qos, &mut map)?;
                    pod.status_qos_class = status.and_then(|s| s.qos_class);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(pod)
    }
}

/// An object key, borrowed from the input when it has no escapes.
pub(crate) struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl Key<'_> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// How the fields read for a pod's QoS class only (the in-tree plugins) are read: each its value
/// when it has the API's shape, else none — never an error, like the fields placement does not
/// read (the API server validated the object before calling the webhook). First typed, in the
/// object's one pass; should one not have the API's shape, the object is read again
/// ([`Qos::read_again`]) with each of them checked as JSON first, then decoded.
#[derive(Debug, Default)]
pub(crate) struct Qos {
    lenient: Cell<bool>,
    /// Set while a field is read typed; left set when it fails.
    failed: Cell<bool>,
}

impl Qos {
    /// The next map value as a QoS field read as `qos` says; with none, skipped unread.
    fn read<'de, A: MapAccess<'de>, T: de::DeserializeOwned>(
        qos: Option<&Self>,
        map: &mut A,
    ) -> Result<Option<T>, A::Error> {
        let Some(qos) = qos else {
            map.next_value::<IgnoredAny>()?;
            return Ok(None);
        };
        qos.field(map)
    }

    fn field<'de, A: MapAccess<'de>, T: de::DeserializeOwned>(&self, map: &mut A) -> Result<Option<T>, A::Error> {
        if self.lenient.get() {
            return Ok(serde_json::from_str(map.next_value::<&RawValue>()?.get()).ok());
        }
        self.failed.set(true);
        let value = map.next_value::<Option<T>>()?;
        self.failed.set(false);
        Ok(value)
    }

    /// After a reading failed: whether a QoS field read typed failed it; if so, the next reading
    /// reads them leniently.
    pub(crate) fn read_again(&self) -> bool {
        let again = self.failed.replace(false) && !self.lenient.get();
        self.lenient.set(self.lenient.get() || again);
        again
    }

    /// Forgets a failed reading (the way the fields are read stays).
    pub(crate) fn reset(&self) {
        self.failed.set(false);
    }
}

/// A pod's `status`, as far as its QoS class goes (`status.qosClass`, which the in-tree plugins
/// read before computing it).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QosStatus {
    #[serde(default)]
    qos_class: Option<String>,
}

struct MetadataSeed<'t> {
    trail: &'t Trail,
    prefix: &'static str,
}

impl<'de> DeserializeSeed<'de> for MetadataSeed<'_> {
    type Value = PodMetadata;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<PodMetadata, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetadataSeed<'_> {
    type Value = PodMetadata;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an ObjectMeta object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PodMetadata, A::Error> {
        let (trail, at) = (self.trail, self.prefix);
        let mut meta = PodMetadata::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                "name" => meta.name = trail.value(&mut map, at, "name")?,
                "generateName" => meta.generate_name = trail.value(&mut map, at, "generateName")?,
                "namespace" => meta.namespace = trail.value(&mut map, at, "namespace")?,
                "labels" => meta.labels = trail.value(&mut map, at, "labels")?,
                "annotations" => meta.annotations = trail.value(&mut map, at, "annotations")?,
                "ownerReferences" => meta.owner_references = trail.value(&mut map, at, "ownerReferences")?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

struct SpecSeed<'t> {
    trail: &'t Trail,
    prefix: &'static str,
    qos: Option<&'t Qos>,
}

impl<'de> DeserializeSeed<'de> for SpecSeed<'_> {
    type Value = PodSpec;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<PodSpec, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SpecSeed<'_> {
    type Value = PodSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a PodSpec object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PodSpec, A::Error> {
        let (trail, at) = (self.trail, self.prefix);
        let mut spec = PodSpec::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                "nodeName" => spec.node_name = trail.value(&mut map, at, "nodeName")?,
                "nodeSelector" => spec.node_selector = trail.value(&mut map, at, "nodeSelector")?,
                "tolerations" => spec.tolerations = trail.value(&mut map, at, "tolerations")?,
                "affinity" => spec.affinity = trail.value(&mut map, at, "affinity")?,
                // The QoS class (the in-tree plugins): the containers' resources, the pod's own.
                "containers" => spec.containers = Qos::read(self.qos, &mut map)?,
                "initContainers" => spec.init_containers = Qos::read(self.qos, &mut map)?,
                "resources" => spec.resources = Qos::read(self.qos, &mut map)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(spec)
    }
}

/// Decodes an `apps/v1` DaemonSet's pod template (`spec.template`) as a pod;
/// `apiVersion` and `kind` are checked when present, the rest of the DaemonSet is skipped.
pub(crate) struct DaemonSetSeed<'t> {
    pub trail: &'t Trail,
}

impl<'de> DeserializeSeed<'de> for DaemonSetSeed<'_> {
    type Value = Pod;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Pod, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DaemonSetSeed<'_> {
    type Value = Pod;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an apps/v1 DaemonSet object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pod, A::Error> {
        let trail = self.trail;
        let mut template = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                "apiVersion" => trail.read(&mut map, "", "apiVersion", Expect("apps/v1"))?,
                "kind" => trail.read(&mut map, "", "kind", Expect("DaemonSet"))?,
                "spec" => {
                    let seed = Nullable(DaemonSetSpecSeed { trail });
                    template = trail.read(&mut map, "", "spec", seed)?.flatten();
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(template.unwrap_or_default())
    }
}

struct DaemonSetSpecSeed<'t> {
    trail: &'t Trail,
}

impl<'de> DeserializeSeed<'de> for DaemonSetSpecSeed<'_> {
    type Value = Option<Pod>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<Pod>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DaemonSetSpecSeed<'_> {
    type Value = Option<Pod>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a DaemonSetSpec object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Pod>, A::Error> {
        let trail = self.trail;
        let mut template = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                "template" => {
                    let seed = Nullable(PodSeed::daemon_set_template(trail));
                    template = trail.read(&mut map, "spec.", "template", seed)?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(template)
    }
}

#[cfg(test)]
mod tests;
