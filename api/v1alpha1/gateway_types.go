package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The CEL rules below mirror gateway/lifecycle (Budgets.Validate) so that they hold with
// no operator running; gateway/lifecycle's package documentation lists each rule with
// its twin here. These choices make them agree with the Go side exactly:
//   - An absent drainDelay is the readiness poll, spec.probes.readiness.periodSeconds ×
//     failureThreshold, read from the defaulted probe fields (the CRD defaults are applied
//     before validation); lifecycle.Budgets.Plan resolves it the same way.
//   - requestTimeout, bindingsDrainTimeout and terminationHeadroom have CRD defaults, so
//     the rules read them without has(): the apiserver defaults them before validating.
//   - The grace period the pod gets must outlast the drain whether it is explicit or
//     derived: ceil(drain + terminationHeadroom) equals the drain only when the headroom
//     is 0s and the drain is a whole number of seconds, so that case is refused too.
//   - The drain is summed in whole milliseconds (getMilliseconds()), exact since every
//     duration must be a whole number of milliseconds; Kubernetes' CEL has no cel.bind,
//     so the sum is spelled out in both rules.

// GatewaySpec is the desired state of a ferrofed gateway.
//
// +kubebuilder:validation:XValidation:rule="!has(self.lifecycle.terminationGracePeriodSeconds) || self.lifecycle.terminationGracePeriodSeconds * 1000 > ((has(self.lifecycle.drainDelay) ? duration(self.lifecycle.drainDelay).getMilliseconds() : self.probes.readiness.periodSeconds * self.probes.readiness.failureThreshold * 1000) + duration(has(self.lifecycle.shutdownTimeout) ? self.lifecycle.shutdownTimeout : self.lifecycle.requestTimeout).getMilliseconds() + duration(self.lifecycle.bindingsDrainTimeout).getMilliseconds())",message="spec.lifecycle.terminationGracePeriodSeconds must be greater than spec.lifecycle.drainDelay + spec.lifecycle.shutdownTimeout + spec.lifecycle.bindingsDrainTimeout (an unset drainDelay is spec.probes.readiness.periodSeconds × failureThreshold, an unset shutdownTimeout is spec.lifecycle.requestTimeout)",messageExpression="'spec.lifecycle.terminationGracePeriodSeconds must be greater than spec.lifecycle.drainDelay (' + (has(self.lifecycle.drainDelay) ? self.lifecycle.drainDelay : 'unset: spec.probes.readiness.periodSeconds × failureThreshold') + ') + spec.lifecycle.shutdownTimeout (' + (has(self.lifecycle.shutdownTimeout) ? self.lifecycle.shutdownTimeout : 'unset: spec.lifecycle.requestTimeout, ' + self.lifecycle.requestTimeout) + ') + spec.lifecycle.bindingsDrainTimeout (' + self.lifecycle.bindingsDrainTimeout + ')'",fieldPath=".lifecycle.terminationGracePeriodSeconds"
// +kubebuilder:validation:XValidation:rule="has(self.lifecycle.terminationGracePeriodSeconds) || duration(self.lifecycle.terminationHeadroom) > duration('0s') || ((has(self.lifecycle.drainDelay) ? duration(self.lifecycle.drainDelay).getMilliseconds() : self.probes.readiness.periodSeconds * self.probes.readiness.failureThreshold * 1000) + duration(has(self.lifecycle.shutdownTimeout) ? self.lifecycle.shutdownTimeout : self.lifecycle.requestTimeout).getMilliseconds() + duration(self.lifecycle.bindingsDrainTimeout).getMilliseconds()) % 1000 != 0",message="spec.lifecycle.terminationHeadroom of 0s makes the derived terminationGracePeriodSeconds equal to spec.lifecycle.drainDelay + spec.lifecycle.shutdownTimeout + spec.lifecycle.bindingsDrainTimeout: the kill would land when the drain may still run; set a headroom above 0s",fieldPath=".lifecycle.terminationHeadroom"
// +kubebuilder:validation:XValidation:rule="!(has(self.replicas) && has(self.autoscaling))",message="spec.replicas and spec.autoscaling are mutually exclusive: with spec.autoscaling the HorizontalPodAutoscaler sets the number of pods between minReplicas and maxReplicas; remove spec.replicas, or spec.autoscaling",fieldPath=".replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.audit) || !has(self.audit.spool) || !has(self.audit.spool.volumeClaimTemplate)",message="spec.autoscaling is not supported with spec.audit.spool.volumeClaimTemplate: the operator picks the spool claims to hand over and delete by spec.replicas, and every scale-down of an autoscaler would hand one over (a Job, then a new volume at the next scale-up); set spec.replicas, or keep the emptyDir spool",fieldPath=".autoscaling"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || (has(self.autoscaling.targetMemoryUtilizationPercentage) && !has(self.autoscaling.targetCPUUtilizationPercentage)) || (!has(self.resources) || ((!has(self.resources.requests) || size(self.resources.requests) == 0) && (!has(self.resources.limits) || size(self.resources.limits) == 0) && (!has(self.resources.claims) || size(self.resources.claims) == 0))) || (has(self.resources.requests) && 'cpu' in self.resources.requests) || (has(self.resources.limits) && 'cpu' in self.resources.limits)",message="spec.autoscaling's CPU target (targetCPUUtilizationPercentage, 80 when no target is set) is a share of the CPU request: spec.resources sets no cpu in requests or limits; add spec.resources.requests.cpu, or leave spec.resources empty for the operator's default requests",fieldPath=".autoscaling"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.autoscaling.targetMemoryUtilizationPercentage) || (!has(self.resources) || ((!has(self.resources.requests) || size(self.resources.requests) == 0) && (!has(self.resources.limits) || size(self.resources.limits) == 0) && (!has(self.resources.claims) || size(self.resources.claims) == 0))) || (has(self.resources.requests) && 'memory' in self.resources.requests) || (has(self.resources.limits) && 'memory' in self.resources.limits)",message="spec.autoscaling.targetMemoryUtilizationPercentage is a share of the memory request: spec.resources sets no memory in requests or limits; add spec.resources.requests.memory, or leave spec.resources empty for the operator's default requests",fieldPath=".autoscaling"
type GatewaySpec struct {
	// replicas is the number of gateway pods, from 0 to 1000; unset, 1 (the operator's
	// default, not written into the object, so that spec.autoscaling can be set without
	// it). With more than one replica the operator adds a PodDisruptionBudget
	// (maxUnavailable 1). Not with autoscaling, which sets the number of pods instead.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// autoscaling hands the number of gateway pods to a HorizontalPodAutoscaler
	// (autoscaling/v2) of the gateway's Deployment that the operator owns, which sets
	// it between minReplicas and maxReplicas; the operator then stops setting the
	// Deployment's replicas. Not with replicas, nor with a persistent audit spool
	// (spec.audit.spool.volumeClaimTemplate). Default: unset, spec.replicas pods.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`

	// topologySpreadConstraints replace, when set, the operator's default spread of the
	// gateway pods (maxSkew 1 across nodes, kubernetes.io/hostname, and across zones,
	// topology.kubernetes.io/zone, both ScheduleAnyway). A constraint without a
	// labelSelector gets the gateway pods' selector labels. At most 8.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.maxSkew >= 1 && (c.whenUnsatisfiable == 'DoNotSchedule' || c.whenUnsatisfiable == 'ScheduleAnyway'))",message="spec.topologySpreadConstraints: every constraint needs maxSkew of at least 1 and whenUnsatisfiable DoNotSchedule or ScheduleAnyway"
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// image is the ferrofed container image, e.g. "ghcr.io/ferrofed/ferrofed:v0.1.0".
	// Required, no default; at most 512 characters, no whitespace. The operator may
	// restrict it to an allow-list (its --allowed-images flag).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	Image string `json:"image,omitempty"`

	// basePath is the path every route of the gateway lives under (server.base_path);
	// the probes use it. Default "/". It starts with "/", does not end with "/" (except
	// "/" itself), holds no "//" and no "." or ".." segment.
	// +optional
	// +default="/"
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^/([A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*)?$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.]?(/|$)')",message="must not hold a . or .. segment"
	BasePath string `json:"basePath,omitempty"`

	// port is the TCP port the gateway listens on (server.listen) and the Service
	// exposes as "http". Default 8080, from 1 to 65535.
	// +optional
	// +default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// lifecycle holds the drain budgets, from which the operator derives the pod's
	// terminationGracePeriodSeconds. Default: every field at its own default.
	// +optional
	// +default={}
	Lifecycle Lifecycle `json:"lifecycle,omitempty,omitzero"`

	// probes overrides the timing of the pod's probes. Default: every field at its own
	// default. The readiness timing also sets the derived drainDelay.
	// +optional
	// +default={}
	Probes Probes `json:"probes,omitempty,omitzero"`

	// config is the rest of the gateway's configuration (ferrofed.toml without the keys
	// this resource owns), inline or from a ConfigMap. Default: none, the gateway's
	// defaults apply.
	// +optional
	Config *GatewayConfig `json:"config,omitempty"`

	// tls turns the listener to https with the certificate of a Secret. Default: off.
	// +optional
	TLS *TLS `json:"tls,omitempty"`

	// resources are the gateway container's compute resources. Default (when neither
	// requests nor limits are set): requests cpu 100m and memory 128Mi, limit memory 512Mi.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector constrains the gateway pods to nodes with these labels. Default: none.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of the gateway pods. Default: none.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity of the gateway pods. Default: none.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// audit sizes what the operator gives an [audit] table with destination
	// "repository": an emptyDir spool volume. Default: every field at its own default.
	// +optional
	Audit *Audit `json:"audit,omitempty"`

	// secretMounts mounts Secrets read-only into the gateway container, under
	// /etc/ferrofed/secrets/, for the files the configuration names (client
	// certificates, CA bundles, bearer token files of bindings and of [audit], the key
	// set of an [[auth.issuers]] jwks_file). The operator never reads these Secrets.
	// Default: none; at most 16, no two at one path.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.exists_one(o, o.mountPath == m.mountPath))",message="spec.secretMounts: two entries have the same mountPath"
	SecretMounts []SecretMount `json:"secretMounts,omitempty"`

	// tracing exports the gateway's OpenTelemetry traces over OTLP/HTTP: the operator
	// renders it as the [tracing] table of ferrofed.toml and mounts the Secrets it
	// names (docs/tracing.md, "On Kubernetes"). Set, the configuration may not hold a
	// [tracing] table of its own. Default: unset, no tracing (unless the configuration
	// has a [tracing] table).
	// +optional
	Tracing *Tracing `json:"tracing,omitempty"`
}

// MaxAutoscalingReplicas bounds spec.autoscaling.maxReplicas, as spec.replicas is bounded.
const MaxAutoscalingReplicas = 1000

// DefaultTargetCPUUtilizationPercentage is the CPU target of an autoscaling spec that
// sets no target at all (the HorizontalPodAutoscaler's own default).
const DefaultTargetCPUUtilizationPercentage int32 = 80

// Autoscaling is the HorizontalPodAutoscaler the operator owns (docs/operator.md,
// "Autoscaling and spread").
//
// +kubebuilder:validation:XValidation:rule="self.maxReplicas >= self.minReplicas",message="spec.autoscaling.maxReplicas must be at least spec.autoscaling.minReplicas",fieldPath=".maxReplicas"
type Autoscaling struct {
	// minReplicas is the fewest gateway pods, from 1 to 1000. With 2 or more the
	// operator adds a PodDisruptionBudget (maxUnavailable 1). Required.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MinReplicas int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most gateway pods, from minReplicas to 1000. Required.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas int32 `json:"maxReplicas,omitempty"`

	// targetCPUUtilizationPercentage is the average CPU use, in percent of the gateway
	// container's CPU request, the autoscaler keeps the pods at; from 1 to 100.
	// Default: 80 when targetMemoryUtilizationPercentage is unset too, else none.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`

	// targetMemoryUtilizationPercentage is the average memory use, in percent of the
	// gateway container's memory request, the autoscaler keeps the pods at; from 1 to
	// 100. Default: unset, no memory target.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetMemoryUtilizationPercentage *int32 `json:"targetMemoryUtilizationPercentage,omitempty"`
}

// Tracing is what the operator renders as [tracing] (docs/tracing.md).
//
// +kubebuilder:validation:XValidation:rule="!has(self.caSecret) || self.endpoint.startsWith('https://')",message="spec.tracing.caSecret needs an https spec.tracing.endpoint: the CA verifies the collector's certificate",fieldPath=".caSecret"
type Tracing struct {
	// endpoint is the OTLP/HTTP receiver's base URL, http or https, without
	// credentials, query or fragment (a collector's token goes in headersSecret):
	// spans are posted to {endpoint}/v1/traces, so the URL must not end in
	// /v1/traces itself. Rendered as tracing.endpoint. Required; at most 2048 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#@[:space:]]+(/[^?#[:space:]]*)?$') && !self.matches('/v1/traces/?$')",message="spec.tracing.endpoint must be an http or https base URL with a host and no credentials, query, fragment or whitespace, not ending in /v1/traces (the gateway appends it)"
	Endpoint string `json:"endpoint,omitempty"`

	// samplingRatio is the share of new traces kept, a decimal string from "0" to "1"
	// with at most 6 decimals ("0.25"); a string, since CRDs avoid floats. It is
	// parent-based: a caller's sampled traceparent is always kept, an unsampled one
	// never. Rendered as tracing.sampling_ratio. Default: unset, the gateway's 1.
	// +optional
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0([.][0-9]{1,6})?|1([.]0{1,6})?)$')",message="spec.tracing.samplingRatio must be a decimal string from 0 to 1 with at most 6 decimals, e.g. 0.25"
	SamplingRatio *string `json:"samplingRatio,omitempty"`

	// timeout bounds one export (one POST to {endpoint}/v1/traces): greater than 0s,
	// at most 60s, a whole number of milliseconds. Rendered as tracing.timeout_ms.
	// Default: unset, the gateway's 5s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+h)?([0-9]+m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('60s')",message="spec.tracing.timeout must be greater than 0s and at most 60s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// headersSecret names a Secret in the Gateway's namespace and the key in it that
	// holds the headers sent with every export, one `Name: value` per line (e.g.
	// "Authorization: Bearer ..."). Only that key is mounted, read-only, and rendered
	// as tracing.headers_file; the gateway reads it again at each export, so a rotated
	// Secret is used once the kubelet has updated the file. Default: unset, no headers.
	// +optional
	HeadersSecret *SecretKeySelector `json:"headersSecret,omitempty"`

	// caSecret names a Secret in the Gateway's namespace and the key in it (default
	// "ca.crt") that holds the PEM CA certificates the https endpoint is verified
	// with. Only that key is mounted, read-only, and rendered as tracing.ca_file. Only
	// with an https endpoint. Default: unset, the system's roots.
	// +optional
	CASecret *SecretKeyRef `json:"caSecret,omitempty"`

	// serviceName is the service.name of every span's resource, rendered as
	// tracing.service_name: printable ASCII, at most 128 characters, not only spaces.
	// Default: unset, the gateway's "ferrofed".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[ -~]*[!-~][ -~]*$')",message="spec.tracing.serviceName must be printable ASCII and not only spaces"
	ServiceName *string `json:"serviceName,omitempty"`
}

// SecretKeySelector names one key of a Secret in the Gateway's namespace; both are
// required.
type SecretKeySelector struct {
	// name of the Secret. Required.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// key in the Secret. Required; at most 253 characters of letters, digits, "-",
	// "_", ".".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// Audit is what the operator gives the gateway's audit spools.
type Audit struct {
	// spool is the spool volume of an [audit] table with destination "repository".
	// +optional
	Spool *AuditSpool `json:"spool,omitempty"`
}

// AuditSpool is the volume the audit spools live in, mounted at /var/lib/ferrofed/audit
// and rendered as audit.spool_dir (and audit.feed.spool_dir): an emptyDir by default,
// which survives the container's restarts, not the pod's deletion; or, with
// volumeClaimTemplate, one PersistentVolumeClaim per replica, which survives both and is
// handed over (drained by a Job) before the operator deletes it (docs/audit-spool.md).
//
// +kubebuilder:validation:XValidation:rule="!(has(self.sizeLimit) && has(self.volumeClaimTemplate))",message="spec.audit.spool.sizeLimit and spec.audit.spool.volumeClaimTemplate are mutually exclusive: sizeLimit sizes the emptyDir spool, volumeClaimTemplate replaces it with a persistent claim per replica; set one of them"
type AuditSpool struct {
	// sizeLimit is the emptyDir's size limit. Default 1Gi, from 4Mi to 128Gi;
	// audit.max_spool_bytes times the number of spools (2 with [audit.feed]) must fit.
	// Not with volumeClaimTemplate.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('4Mi')) >= 0 && quantity(string(self)).compareTo(quantity('128Gi')) <= 0",message="spec.audit.spool.sizeLimit must be from 4Mi to 128Gi"
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`

	// volumeClaimTemplate is, when set, the PersistentVolumeClaim each replica gets for
	// its spools instead of the emptyDir: the gateway then runs as a StatefulSet
	// whose claims are named spool-<name>-<ordinal>, kept across restarts, rollouts and
	// rescheduling. A claim whose replica is gone for good (a scale-down, a switch back
	// to the emptyDir, the Gateway's deletion) is drained by a hand-over Job and deleted
	// only once that Job reports it empty. accessModes must be ReadWriteOnce or
	// ReadWriteOncePod; resources.requests.storage is required, from 4Mi to 128Gi, and
	// must hold audit.max_spool_bytes times the number of spools plus the file
	// system's headroom (an eighth of that and 64Mi). Not with sizeLimit.
	// Default: unset (the emptyDir).
	// +optional
	VolumeClaimTemplate *SpoolVolumeClaimTemplate `json:"volumeClaimTemplate,omitempty"`

	// retainOnDelete is whether the spool claims stay when the Gateway is deleted: when
	// true the operator names them in an Event and lets the Gateway go at once, without
	// handing them over. Default false: a deleted Gateway waits (a finalizer) until
	// every claim was handed over and deleted. Only with volumeClaimTemplate.
	// +optional
	// +default=false
	RetainOnDelete *bool `json:"retainOnDelete,omitempty"`
}

// SpoolVolumeClaimTemplate is the template of each replica's spool claim, as the
// Prometheus operator's storage.volumeClaimTemplate: labels and annotations, and the
// claim's spec.
//
// +kubebuilder:validation:XValidation:rule="has(self.spec) && has(self.spec.accessModes) && size(self.spec.accessModes) > 0 && self.spec.accessModes.all(m, m == 'ReadWriteOnce' || m == 'ReadWriteOncePod')",message="spec.audit.spool.volumeClaimTemplate.spec.accessModes must be set, each ReadWriteOnce or ReadWriteOncePod: a spool has one writer, its own replica",fieldPath=".spec.accessModes"
// +kubebuilder:validation:XValidation:rule="has(self.spec) && has(self.spec.resources) && has(self.spec.resources.requests) && 'storage' in self.spec.resources.requests && quantity(string(self.spec.resources.requests['storage'])).compareTo(quantity('4Mi')) >= 0 && quantity(string(self.spec.resources.requests['storage'])).compareTo(quantity('128Gi')) <= 0",message="spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage is required, from 4Mi to 128Gi",fieldPath=".spec.resources"
type SpoolVolumeClaimTemplate struct {
	// metadata holds the labels and annotations every claim gets (the operator adds its
	// own labels, which win).
	// +optional
	Metadata *SpoolClaimMetadata `json:"metadata,omitempty"`

	// spec is the claim's spec: accessModes, resources.requests.storage, and
	// storageClassName, volumeMode or a selector as the cluster needs.
	// +required
	Spec *corev1.PersistentVolumeClaimSpec `json:"spec,omitempty"`
}

// SpoolClaimMetadata is the part of a claim's metadata a template may set.
type SpoolClaimMetadata struct {
	// labels of each claim.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations of each claim.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// SecretMount mounts one Secret, read-only, into the gateway container.
type SecretMount struct {
	// secretName names a Secret in the Gateway's namespace. Required.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`
	// mountPath is the directory the Secret's keys appear in, as files: under
	// /etc/ferrofed/secrets/, with no "." or ".." segment. Required.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/etc/ferrofed/secrets/') && size(self) > size('/etc/ferrofed/secrets/') && !self.matches('(^|/)[.][.]?(/|$)') && !self.contains('//') && !self.endsWith('/')",message="mountPath must be a directory under /etc/ferrofed/secrets/, with no . or .. segment, no // and no trailing /"
	MountPath string `json:"mountPath,omitempty"`
}

// Lifecycle holds the budgets of the gateway's four-step drain (see gateway/lifecycle).
// Every duration is a Kubernetes duration string from 0s to 1h in the form Go prints
// it: hours, minutes, seconds with at most three decimals, milliseconds ("1h", "1m30s",
// "2.5s", "250ms"). The form keeps every value a whole number of milliseconds, the unit
// of ferrofed.toml; "1.5m" or "500us" are refused.
//
// +kubebuilder:validation:XValidation:rule="!has(self.shutdownTimeout) || duration(self.shutdownTimeout) >= duration(self.requestTimeout)",message="spec.lifecycle.shutdownTimeout must not be shorter than spec.lifecycle.requestTimeout: a request accepted just before the listener closes may run for the whole request timeout",messageExpression="'spec.lifecycle.shutdownTimeout (' + self.shutdownTimeout + ') must not be shorter than spec.lifecycle.requestTimeout (' + self.requestTimeout + '): a request accepted just before the listener closes may run for the whole request timeout'",fieldPath=".shutdownTimeout"
type Lifecycle struct {
	// requestTimeout is the longest a client request may run (server.request_timeout_ms).
	// Default "30s"; greater than 0s, at most 1h.
	// +optional
	// +default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+h)?([0-9]+m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1h')",message="spec.lifecycle.requestTimeout must be greater than 0s and at most 1h"
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`

	// drainDelay is step 1 of the drain: how long the listener keeps accepting after
	// readiness turned 503 (server.drain_delay_ms). Default: derived, one readiness poll,
	// spec.probes.readiness.periodSeconds × failureThreshold. From 0s to 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+h)?([0-9]+m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="spec.lifecycle.drainDelay must be from 0s to 1h"
	DrainDelay *metav1.Duration `json:"drainDelay,omitempty"`

	// shutdownTimeout is step 3 of the drain: how long in-flight requests get to finish
	// (server.shutdown_timeout_ms). Default: requestTimeout. Not shorter than
	// requestTimeout, at most 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+h)?([0-9]+m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="spec.lifecycle.shutdownTimeout must be from 0s to 1h"
	ShutdownTimeout *metav1.Duration `json:"shutdownTimeout,omitempty"`

	// bindingsDrainTimeout is step 4 of the drain: how long the bindings get to stop
	// their processes (server.bindings_drain_timeout_ms). Default "5s", from 0s to 1h.
	// +optional
	// +default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+h)?([0-9]+m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="spec.lifecycle.bindingsDrainTimeout must be from 0s to 1h"
	BindingsDrainTimeout *metav1.Duration `json:"bindingsDrainTimeout,omitempty"`

	// terminationHeadroom is the room left after the drain, before the kubelet's
	// SIGKILL, for the last metrics and spans to be pushed. Default "5s", from 0s to 1h;
	// under 5s draws an admission warning.
	// +optional
	// +default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+h)?([0-9]+m)?([0-9]+([.][0-9]{1,3})?s)?([0-9]+ms)?)$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="spec.lifecycle.terminationHeadroom must be from 0s to 1h"
	TerminationHeadroom *metav1.Duration `json:"terminationHeadroom,omitempty"`

	// terminationGracePeriodSeconds replaces, when set, the derived grace period
	// ceil(drainDelay + shutdownTimeout + bindingsDrainTimeout + terminationHeadroom).
	// Default: unset (derived). In seconds, minimum 0; it must be greater than
	// drainDelay + shutdownTimeout + bindingsDrainTimeout.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// Probes holds the timing of the gateway pod's probes. The paths, port and scheme are
// derived from basePath, port and tls.
type Probes struct {
	// readiness is the readinessProbe on {basePath}/health/readiness. Default: period
	// 5s, failure threshold 2, timeout 1s; their product is the derived drainDelay.
	// +optional
	// +default={}
	Readiness ReadinessProbe `json:"readiness,omitempty,omitzero"`

	// startup is the startupProbe on {basePath}/health/readiness. Default: period 2s,
	// failure threshold 30 (a minute to start), timeout 1s.
	// +optional
	// +default={}
	Startup StartupProbe `json:"startup,omitempty,omitzero"`

	// liveness is the livenessProbe on {basePath}/health. Default: period 10s, failure
	// threshold 3, timeout 1s.
	// +optional
	// +default={}
	Liveness LivenessProbe `json:"liveness,omitempty,omitzero"`
}

// ReadinessProbe is the timing of the readiness probe. periodSeconds × failureThreshold
// is at most 1h, the bound of a drainDelay.
type ReadinessProbe struct {
	// periodSeconds is how often the kubelet probes readiness. Default 5, from 1 to 120.
	// +optional
	// +default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=120
	PeriodSeconds *int32 `json:"periodSeconds,omitempty"`
	// failureThreshold is how many failed probes in a row make the pod unready.
	// Default 2, from 1 to 30.
	// +optional
	// +default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=30
	FailureThreshold *int32 `json:"failureThreshold,omitempty"`
	// timeoutSeconds is how long one probe may take. Default 1, from 1 to 60.
	// +optional
	// +default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// StartupProbe is the timing of the startup probe.
type StartupProbe struct {
	// initialDelaySeconds is how long after start the first probe runs. Default 0,
	// from 0 to 3600.
	// +optional
	// +default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	InitialDelaySeconds *int32 `json:"initialDelaySeconds,omitempty"`
	// periodSeconds is how often the kubelet probes. Default 2, from 1 to 120.
	// +optional
	// +default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=120
	PeriodSeconds *int32 `json:"periodSeconds,omitempty"`
	// failureThreshold is how many failed probes in a row restart the container.
	// Default 30, from 1 to 1000.
	// +optional
	// +default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	FailureThreshold *int32 `json:"failureThreshold,omitempty"`
	// timeoutSeconds is how long one probe may take. Default 1, from 1 to 60.
	// +optional
	// +default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// LivenessProbe is the timing of the liveness probe.
type LivenessProbe struct {
	// periodSeconds is how often the kubelet probes liveness. Default 10, from 1 to 300.
	// +optional
	// +default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	PeriodSeconds *int32 `json:"periodSeconds,omitempty"`
	// failureThreshold is how many failed probes in a row restart the container.
	// Default 3, from 1 to 30.
	// +optional
	// +default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=30
	FailureThreshold *int32 `json:"failureThreshold,omitempty"`
	// timeoutSeconds is how long one probe may take. Default 1, from 1 to 60.
	// +optional
	// +default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// GatewayConfig is the rest of ferrofed.toml: inline, or read from a ConfigMap. The keys
// the resource owns (server.listen, server.base_path, the lifecycle *_ms keys,
// server.termination_grace_period_seconds, server.tls.*) are refused in it.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.inline) && has(self.configMapRef))",message="spec.config.inline and spec.config.configMapRef are mutually exclusive: set one of them"
type GatewayConfig struct {
	// inline is TOML, the rest of ferrofed.toml. Default: empty. At most 256 KiB.
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	Inline *string `json:"inline,omitempty"`

	// configMapRef names a ConfigMap in the Gateway's namespace holding the rest of
	// ferrofed.toml. Default: none.
	// +optional
	ConfigMapRef *ConfigMapKeyRef `json:"configMapRef,omitempty"`
}

// ConfigMapKeyRef names one key of a ConfigMap in the Gateway's namespace.
type ConfigMapKeyRef struct {
	// name of the ConfigMap. Required.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// key holding the TOML. Default "ferrofed.toml".
	// +optional
	// +default="ferrofed.toml"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// TLS turns the gateway's listener to https, and with clientCASecret requires client
// certificates. The operator never reads these Secrets: the kubelet mounts them into
// the pods, read-only, and a missing one (or key) fails the mount, which the pod's
// events name.
//
// +kubebuilder:validation:XValidation:rule="!has(self.clientCASecret) || has(self.healthcheckIdentitySecret)",message="spec.tls.clientCASecret requires spec.tls.healthcheckIdentitySecret: with client certificates required the pod's probes run ferrofed healthcheck, which must present a client certificate the CA of spec.tls.clientCASecret accepts",fieldPath=".healthcheckIdentitySecret"
// +kubebuilder:validation:XValidation:rule="!has(self.healthcheckIdentitySecret) || has(self.clientCASecret)",message="spec.tls.healthcheckIdentitySecret is only presented when spec.tls.clientCASecret requires client certificates: set spec.tls.clientCASecret too, or remove spec.tls.healthcheckIdentitySecret",fieldPath=".healthcheckIdentitySecret"
type TLS struct {
	// secretName names a kubernetes.io/tls Secret in the Gateway's namespace; its
	// tls.crt and tls.key are mounted and rendered into server.tls.certificate_file and
	// server.tls.key_file. Required.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// clientCASecret names a Secret in the Gateway's namespace and the key in it that
	// holds the PEM CA certificates client certificates are verified against: set, the
	// listener requires a client certificate on every connection
	// (server.tls.client_ca_file), and the pod's probes become exec probes running
	// `ferrofed healthcheck` (the kubelet's HTTPS probes present no certificate), so
	// the image must have ferrofed on its PATH. It needs healthcheckIdentitySecret.
	// Default: unset, no client certificate asked.
	// +optional
	ClientCASecret *SecretKeyRef `json:"clientCASecret,omitempty"`

	// healthcheckIdentitySecret names a kubernetes.io/tls Secret in the Gateway's
	// namespace: the client certificate (tls.crt) and key (tls.key) `ferrofed
	// healthcheck` presents in the pod's probes (server.tls.healthcheck_identity_file
	// and healthcheck_identity_key_file). Its certificate must be accepted by the CA of
	// clientCASecret, which it needs. Default: unset.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	HealthcheckIdentitySecret *string `json:"healthcheckIdentitySecret,omitempty"`
}

// SecretKeyRef names one key of a Secret in the Gateway's namespace.
type SecretKeyRef struct {
	// name of the Secret. Required.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// key in the Secret. Default "ca.crt" (the key cert-manager and kubernetes.io/tls
	// Secrets use for the CA); at most 253 characters of letters, digits, "-", "_", ".".
	// +optional
	// +default="ca.crt"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// GatewayStatus is the observed state of a Gateway.
type GatewayStatus struct {
	// conditions are Ready, Progressing and ConfigValid (see the ConditionType constants).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// terminationGracePeriodSeconds is the grace period of the current spec, in
	// seconds: the explicit value, or the derived one. The pods get it once the
	// configuration passes (ConfigValid=True); until then they keep the previous one.
	// +optional
	TerminationGracePeriodSeconds int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// gracePeriod is the breakdown of terminationGracePeriodSeconds.
	// +optional
	GracePeriod *GracePeriodBreakdown `json:"gracePeriod,omitempty"`

	// replicas is the number of gateway pods the Deployment has.
	// +optional
	Replicas int32 `json:"replicas"`

	// readyReplicas is the number of gateway pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// selector is the label selector of the gateway pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// drains are the last drains of this Gateway's pods, newest first (at most
	// MaxDrainRecords), as each gateway container reported it in its termination
	// message when the pod was deleted, or as the kubelet reported its kill.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Drains []DrainRecord `json:"drains,omitempty"`

	// audit is where the audit records of a persistent spool wait: each spool claim, its
	// replica (or "orphaned"), what it held as last reported, and its hand-over. Absent
	// when the Gateway has no spool claims.
	// +optional
	Audit *AuditStatus `json:"audit,omitempty"`

	// dependencies is what the operator last read of the ready pods' dependency
	// reports: per report key, the worst state across the replicas and how many
	// replicas report each state (docs/operator.md, "The operator reads its pods").
	// Absent while polling is off or no pod of the Gateway was read.
	// +optional
	Dependencies *DependenciesStatus `json:"dependencies,omitempty"`
}

// MaxDependencyKeys bounds status.dependencies.keys; MaxPolledPods bounds
// status.dependencies.pods.
const (
	MaxDependencyKeys = 128
	MaxPolledPods     = 32
)

// DependenciesStatus sums up the dependency reports of a Gateway's ready pods.
type DependenciesStatus struct {
	// lastPollTime is when the states below were read; it moves when they change, and
	// at least every few minutes while they stay the same.
	// +optional
	LastPollTime *metav1.Time `json:"lastPollTime,omitempty"`

	// replicasPolled is how many ready pods were polled.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReplicasPolled int32 `json:"replicasPolled"`

	// replicasRead is how many of them answered with a report.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReplicasRead int32 `json:"replicasRead"`

	// membersReachable is "<up>/<all>": the member endpoints every replica reports
	// up, of all the member endpoints reported.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	MembersReachable string `json:"membersReachable,omitempty"`

	// keys are the report keys ("member/<endpoint id>" and each binding's key), the
	// worst first, then by key; at most MaxDependencyKeys.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	Keys []DependencyKeyStatus `json:"keys,omitempty"`

	// keysNotListed is how many keys keys leaves out past its bound.
	// +optional
	KeysNotListed int32 `json:"keysNotListed,omitempty"`

	// pods are the polled pods, by name, at most MaxPolledPods: each one's phase
	// (from its readiness answer) and the keys it does not report up.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Pods []PolledPodStatus `json:"pods,omitempty"`
}

// DependencyKeyStatus is one report key across the replicas.
type DependencyKeyStatus struct {
	// key is "member/<endpoint id>" for a member endpoint, else the binding's report
	// key (resolver, consent, localizer, demographics, directory, audit_repository,
	// audit_feed, identity_registry).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=80
	Key string `json:"key,omitempty"`

	// state is the worst state a replica reports: down, failing, degraded, unknown,
	// up, in that order.
	// +required
	// +kubebuilder:validation:Enum=up;down;failing;degraded;unknown
	State string `json:"state,omitempty"`

	// up counts the replicas that report the key up.
	// +optional
	Up int32 `json:"up,omitempty"`

	// down counts the replicas that report it down.
	// +optional
	Down int32 `json:"down,omitempty"`

	// failing counts the replicas that report it failing.
	// +optional
	Failing int32 `json:"failing,omitempty"`

	// degraded counts the replicas that report it degraded.
	// +optional
	Degraded int32 `json:"degraded,omitempty"`

	// unknown counts the replicas that report it unknown.
	// +optional
	Unknown int32 `json:"unknown,omitempty"`
}

// PolledPodStatus is one polled pod.
type PolledPodStatus struct {
	// name of the pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// lifecycle is where its readiness answer said the gateway is: booting, serving or
	// draining; empty when it could not be read.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Lifecycle string `json:"lifecycle,omitempty"`

	// notUp are the keys this pod does not report up, as "key=state", at most 16.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=100
	NotUp []string `json:"notUp,omitempty"`

	// message says why the pod's report could not be read (the class of the failure,
	// never an address or a body); empty when it was read.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// MaxAuditClaims is how many claims status.audit.claims lists; the totals count every
// claim, and claimsNotListed says how many more there are.
const MaxAuditClaims = 1000

// AuditStatus sums up a Gateway's spool claims.
type AuditStatus struct {
	// claims are the spool claims, orphaned ones first, then by name; at most
	// MaxAuditClaims.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Claims []SpoolClaimStatus `json:"claims,omitempty"`

	// claimsNotListed is how many claims claims leaves out past its bound (counted in
	// the totals all the same).
	// +optional
	ClaimsNotListed int32 `json:"claimsNotListed,omitempty"`

	// orphanedClaims is how many claims no replica owns any more, waiting for their
	// hand-over.
	// +optional
	OrphanedClaims int32 `json:"orphanedClaims"`

	// undeliveredRecords is the sum of every claim's reported undelivered records.
	// +optional
	UndeliveredRecords int64 `json:"undeliveredRecords"`

	// undeliveredBytes is the sum of every claim's reported undelivered bytes.
	// +optional
	UndeliveredBytes int64 `json:"undeliveredBytes"`

	// retiringPods are the pods of the emptyDir Deployment a switch to a persistent
	// spool left behind: out of the Service, still running, each deleted once its
	// spool reads empty. At most MaxRetiringPods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	RetiringPods []RetiringPodStatus `json:"retiringPods,omitempty"`
}

// MaxRetiringPods bounds status.audit.retiringPods.
const MaxRetiringPods = 100

// RetiringPodStatus is one retiring pod and its spool's backlog as last read.
type RetiringPodStatus struct {
	// name of the pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// undeliveredRecords is what the pod's spools held, undelivered (quarantine
	// included), at lastRead.
	// +optional
	// +kubebuilder:validation:Minimum=0
	UndeliveredRecords int64 `json:"undeliveredRecords"`

	// undeliveredBytes are those records' bytes on disk.
	// +optional
	// +kubebuilder:validation:Minimum=0
	UndeliveredBytes int64 `json:"undeliveredBytes"`

	// lastRead is when the operator last read the backlog; absent when it never could.
	// +optional
	LastRead *metav1.Time `json:"lastRead,omitempty"`

	// message says why the last read failed; empty when it succeeded.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// SpoolClaimStatus is one spool claim.
type SpoolClaimStatus struct {
	// name of the PersistentVolumeClaim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// replica is the pod that owns the claim, or "orphaned" when no replica will.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica,omitempty"`

	// undeliveredRecords is what the spools of the claim held, undelivered, when last
	// reported (reportedBy); 0 when never reported.
	// +optional
	// +kubebuilder:validation:Minimum=0
	UndeliveredRecords int64 `json:"undeliveredRecords"`

	// undeliveredBytes are those records' bytes on disk.
	// +optional
	// +kubebuilder:validation:Minimum=0
	UndeliveredBytes int64 `json:"undeliveredBytes"`

	// reportedBy is what reported the figures: "drain" (the last drain of the
	// replica's pod, its termination message) or "handover" (a hand-over Job's
	// message); empty when nothing has reported yet.
	// +optional
	// +kubebuilder:validation:Enum=drain;handover
	ReportedBy string `json:"reportedBy,omitempty"`

	// handOver is the claim's current hand-over Job, if any.
	// +optional
	HandOver *HandOverStatus `json:"handOver,omitempty"`

	// releaseRequested is true while the claim carries the annotation
	// ferrofed.io/release-quarantine=true that the operator has not acted on. It is
	// acted on only when set after the status showed the claim's hand-over in state
	// "quarantineLeft": the claim is then deleted with its quarantine (and leaves
	// this list). Set earlier, or on any other claim, it releases nothing.
	// +optional
	ReleaseRequested bool `json:"releaseRequested,omitempty"`
}

// HandOverStatus is a hand-over Job of one claim.
type HandOverStatus struct {
	// job is the Job's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Job string `json:"job,omitempty"`

	// state is "running", "succeeded", "failed", or "quarantineLeft": the Job
	// delivered everything it could and only quarantined records are left (the
	// claim's undeliveredRecords), which no Job can deliver; no new Job is started.
	// +required
	// +kubebuilder:validation:Enum=running;succeeded;failed;quarantineLeft
	State string `json:"state,omitempty"`
}

// Values of SpoolClaimStatus.Replica, ReportedBy and HandOverStatus.State.
const (
	ReplicaOrphaned     = "orphaned"
	ReportedByDrain     = "drain"
	ReportedByHandOver  = "handover"
	HandOverRunning     = "running"
	HandOverSucceeded   = "succeeded"
	HandOverFailedState = "failed"
	// HandOverQuarantineLeft: the Job exited with lifecycle.HandOverExitQuarantine.
	HandOverQuarantineLeft = "quarantineLeft"
)

// MaxDrainRecords is how many drains status.drains keeps.
const MaxDrainRecords = 10

// DrainRecord is how one gateway pod's drain went.
type DrainRecord struct {
	// pod is the name of the pod that drained.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod,omitempty"`

	// ended is when the gateway container terminated; the kubelet always reports it
	// (optional only in that a zero time is not written).
	// +optional
	Ended metav1.Time `json:"ended,omitzero"`

	// outcome is "completed" (every in-flight request finished), "cut" (the shutdown
	// timeout closed connections still open), "killed" (the container was killed, or
	// exited failing, before its drain reported: it ran out of grace period) or
	// "unknown" (it exited cleanly without a report).
	// +required
	// +kubebuilder:validation:Enum=completed;cut;killed;unknown
	Outcome string `json:"outcome,omitempty"`

	// durationMilliseconds is how long the drain took, from SIGTERM: the gateway's own
	// figure, or, without a report, from the deletion to the container's end; 0 when
	// not known.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DurationMilliseconds int64 `json:"durationMilliseconds,omitempty"`

	// gracePeriodSeconds is the grace period the pod had.
	// +optional
	// +kubebuilder:validation:Minimum=0
	GracePeriodSeconds int64 `json:"gracePeriodSeconds,omitempty"`

	// cutConnections is how many connections the drain closed at its shutdown timeout.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CutConnections int32 `json:"cutConnections,omitempty"`

	// abandonedBindings are the bindings the drain abandoned in its last step.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	AbandonedBindings []string `json:"abandonedBindings,omitempty"`

	// exitCode is the gateway container's exit code (137: killed).
	// +optional
	ExitCode int32 `json:"exitCode,omitempty"`
}

// GracePeriodBreakdown shows where terminationGracePeriodSeconds comes from, as
// duration strings.
type GracePeriodBreakdown struct {
	// drainDelay is step 1 of the drain.
	// +optional
	DrainDelay string `json:"drainDelay,omitempty"`
	// drainDelayDerived is true when drainDelay is the readiness poll, not spec.
	// +optional
	DrainDelayDerived bool `json:"drainDelayDerived,omitempty"`
	// shutdownTimeout is step 3 of the drain.
	// +optional
	ShutdownTimeout string `json:"shutdownTimeout,omitempty"`
	// bindingsDrainTimeout is step 4 of the drain.
	// +optional
	BindingsDrainTimeout string `json:"bindingsDrainTimeout,omitempty"`
	// terminationHeadroom is the room after the drain.
	// +optional
	TerminationHeadroom string `json:"terminationHeadroom,omitempty"`
	// explicit is true when spec.lifecycle.terminationGracePeriodSeconds set the value.
	// +optional
	Explicit bool `json:"explicit,omitempty"`
}

// Gateway is a ferrofed federation gateway: the operator runs it as a Deployment whose
// grace period and probes it derives from the drain budgets.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=fgw,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Grace",type=integer,JSONPath=`.status.terminationGracePeriodSeconds`
// +kubebuilder:printcolumn:name="Last-Drain",type=string,JSONPath=`.status.drains[0].outcome`
// +kubebuilder:printcolumn:name="Members",type=string,JSONPath=`.status.dependencies.membersReachable`
// +kubebuilder:printcolumn:name="Audit-Backlog",type=integer,JSONPath=`.status.audit.undeliveredRecords`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label of at most 63 characters (lowercase letters, digits and '-', starting with a letter, no '.'): the Gateway's Service, Deployment, ConfigMap and PodDisruptionBudget are named after it"
type Gateway struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired gateway.
	// +required
	Spec GatewaySpec `json:"spec,omitzero"`

	// status is what the operator observed and derived.
	// +optional
	Status GatewayStatus `json:"status,omitempty"`
}

// GatewayList is a list of Gateways.
//
// +kubebuilder:object:root=true
type GatewayList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gateway `json:"items"`
}
