// Package controllers holds the GatewayReconciler and the pure builders of the objects
// it owns. A builder is a function of the Gateway (and of its lifecycle plan and rendered
// configuration, both made once per reconcile): no client, no clock, no environment;
// each is golden-file tested.
package controllers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// Labels and annotations the operator sets.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// AnnotationConfigHash on the pod template is the sha256 of the rendered
	// ferrofed.toml: a change of configuration changes the template and rolls the pods.
	AnnotationConfigHash = "ferrofed.io/config-hash"
	// FieldOwner is the one field manager of everything the operator applies.
	FieldOwner = "ferrofed-operator"
	// ContainerName is the gateway container of the pod.
	ContainerName = "gateway"
	// PortName names the gateway's port on the container and the Service.
	PortName = "http"
)

// SelectorLabels select the pods of one Gateway.
func SelectorLabels(gw *ferrofedv1alpha1.Gateway) map[string]string {
	return map[string]string{LabelName: "ferrofed", LabelInstance: gw.Name}
}

// Labels are set on every object the operator owns.
func Labels(gw *ferrofedv1alpha1.Gateway) map[string]string {
	l := SelectorLabels(gw)
	l[LabelManagedBy] = FieldOwner
	return l
}

func ownerReference(gw *ferrofedv1alpha1.Gateway) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(ferrofedv1alpha1.GroupVersion.String()).
		WithKind("Gateway").
		WithName(gw.Name).
		WithUID(gw.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// ConfigHash is the sha256 of the rendered configuration, in hex.
func ConfigHash(rendered []byte) string {
	sum := sha256.Sum256(rendered)
	return hex.EncodeToString(sum[:])
}

// ConfigMap holds the rendered ferrofed.toml and, when the operator polls the pods,
// its issuer's public key set (jwks, "" for none).
func ConfigMap(gw *ferrofedv1alpha1.Gateway, rendered []byte, jwks string) *corev1ac.ConfigMapApplyConfiguration {
	data := map[string]string{gatewayspec.ConfigFileName: string(rendered)}
	if jwks != "" {
		data[gatewayspec.OperatorJWKSKey] = jwks
	}
	return corev1ac.ConfigMap(gw.Name, gw.Namespace).
		WithLabels(Labels(gw)).
		WithOwnerReferences(ownerReference(gw)).
		WithData(data)
}

// probePath joins the base path and a health route: "/" + "health" is "/health".
func probePath(gw *ferrofedv1alpha1.Gateway, route string) string {
	return path.Join(gw.Spec.BasePathOrDefault(), route)
}

func httpGet(gw *ferrofedv1alpha1.Gateway, route string) *corev1ac.HTTPGetActionApplyConfiguration {
	scheme := corev1.URISchemeHTTP
	if gw.Spec.TLS != nil {
		scheme = corev1.URISchemeHTTPS
	}
	return corev1ac.HTTPGetAction().
		WithPath(probePath(gw, route)).
		WithPort(intstr.FromString(PortName)).
		WithScheme(scheme)
}

// HealthcheckCommand is what an exec probe runs: the ferrofed binary, found on the
// image's PATH (the shipped image has it in /usr/local/bin).
const HealthcheckCommand = "ferrofed"

// ExecProbeMargin is the part of a probe's timeoutSeconds left to starting the
// healthcheck process and reading its configuration: the healthcheck's own --timeout is
// the rest, so that it answers, with its reason, before the kubelet gives up on it.
const ExecProbeMargin = 250 * time.Millisecond

// HealthcheckTimeout is the --timeout of an exec probe whose timeoutSeconds is
// timeoutSeconds (from 1, the CRD's minimum).
func HealthcheckTimeout(timeoutSeconds int32) time.Duration {
	return time.Duration(timeoutSeconds)*time.Second - ExecProbeMargin
}

// probeHandler asks route ("health" or "health/readiness") with an HTTP(S) GET, or,
// when the listener requires client certificates, which the kubelet's probes cannot
// present, with `ferrofed healthcheck` run in the container and presenting the
// healthcheck identity.
func probeHandler(gw *ferrofedv1alpha1.Gateway, probe *corev1ac.ProbeApplyConfiguration, route string, timeoutSeconds int32) *corev1ac.ProbeApplyConfiguration {
	if !gw.Spec.ClientCertificatesRequired() {
		return probe.WithHTTPGet(httpGet(gw, route))
	}
	cmd := []string{HealthcheckCommand, "healthcheck", "--config", gatewayspec.ConfigPath}
	if route == "health" {
		cmd = append(cmd, "--liveness")
	}
	cmd = append(cmd, "--timeout", HealthcheckTimeout(timeoutSeconds).String())
	return probe.WithExec(corev1ac.ExecAction().WithCommand(cmd...))
}

func probes(gw *ferrofedv1alpha1.Gateway) (startup, readiness, liveness *corev1ac.ProbeApplyConfiguration) {
	p := gw.Spec.Probes
	startupTimeout := ptr.Deref(p.Startup.TimeoutSeconds, ferrofedv1alpha1.DefaultStartupTimeoutSeconds)
	startup = probeHandler(gw, corev1ac.Probe(), "health/readiness", startupTimeout).
		WithPeriodSeconds(ptr.Deref(p.Startup.PeriodSeconds, ferrofedv1alpha1.DefaultStartupPeriodSeconds)).
		WithFailureThreshold(ptr.Deref(p.Startup.FailureThreshold, ferrofedv1alpha1.DefaultStartupFailureThreshold)).
		WithTimeoutSeconds(startupTimeout)
	readinessTimeout := ptr.Deref(p.Readiness.TimeoutSeconds, ferrofedv1alpha1.DefaultReadinessTimeoutSeconds)
	readiness = probeHandler(gw, corev1ac.Probe(), "health/readiness", readinessTimeout).
		WithPeriodSeconds(ptr.Deref(p.Readiness.PeriodSeconds, ferrofedv1alpha1.DefaultReadinessPeriodSeconds)).
		WithFailureThreshold(ptr.Deref(p.Readiness.FailureThreshold, ferrofedv1alpha1.DefaultReadinessFailureThreshold)).
		WithTimeoutSeconds(readinessTimeout)
	livenessTimeout := ptr.Deref(p.Liveness.TimeoutSeconds, ferrofedv1alpha1.DefaultLivenessTimeoutSeconds)
	liveness = probeHandler(gw, corev1ac.Probe(), "health", livenessTimeout).
		WithPeriodSeconds(ptr.Deref(p.Liveness.PeriodSeconds, ferrofedv1alpha1.DefaultLivenessPeriodSeconds)).
		WithFailureThreshold(ptr.Deref(p.Liveness.FailureThreshold, ferrofedv1alpha1.DefaultLivenessFailureThreshold)).
		WithTimeoutSeconds(livenessTimeout)
	if d := ptr.Deref(p.Startup.InitialDelaySeconds, 0); d > 0 {
		startup.WithInitialDelaySeconds(d)
	}
	return startup, readiness, liveness
}

// Deployment runs the gateway pods of a Gateway whose spools live in an emptyDir (or
// that has none). Its grace period is the plan's; no preStop hook is needed, since the
// process itself keeps accepting for drainDelay after SIGTERM. rendered is the rendered
// configuration: its ConfigHash rolls the pods, and an [audit] table with destination
// "repository" in it gets the spool emptyDir.
//
// With spec.autoscaling the configuration has no replicas: the HorizontalPodAutoscaler
// sets them, and a field the operator does not apply is one it never sets back
// (replicasSeed hands it over first).
func Deployment(gw *ferrofedv1alpha1.Gateway, plan lifecycle.Plan, rendered []byte) *appsv1ac.DeploymentApplyConfiguration {
	spec := appsv1ac.DeploymentSpec()
	if !gw.Spec.Autoscaled() {
		spec.WithReplicas(gw.Spec.ReplicasOrDefault())
	}
	return appsv1ac.Deployment(gw.Name, gw.Namespace).
		WithLabels(Labels(gw)).
		WithOwnerReferences(ownerReference(gw)).
		WithSpec(spec.
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(gw))).
			WithStrategy(appsv1ac.DeploymentStrategy().
				WithType(appsv1.RollingUpdateDeploymentStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
					WithMaxUnavailable(intstr.FromInt32(0)).
					WithMaxSurge(intstr.FromInt32(1)))).
			WithTemplate(podTemplate(gw, plan, rendered, appsv1.DefaultDeploymentUniqueLabelKey)))
}

// podTemplate is the gateway pod of Deployment and StatefulSet alike: the same labels
// (the Service, the PodDisruptionBudget and the drain watch select them), the same
// container and volumes, the spool volume aside (spoolVolume). matchLabelKeys are the
// labels of the workload's own revision that the default spread constraints match on
// (the Deployment's pod-template-hash), so that a rollout's new pods spread among
// themselves.
func podTemplate(gw *ferrofedv1alpha1.Gateway, plan lifecycle.Plan, rendered []byte, matchLabelKeys ...string) *corev1ac.PodTemplateSpecApplyConfiguration {
	configHash := ConfigHash(rendered)
	startup, readiness, liveness := probes(gw)
	container := corev1ac.Container().
		WithName(ContainerName).
		WithImage(gw.Spec.Image).
		WithArgs("serve", "--config", gatewayspec.ConfigPath).
		WithTerminationMessagePath(gatewayspec.TerminationMessagePath).
		WithTerminationMessagePolicy(corev1.TerminationMessageReadFile).
		WithPorts(corev1ac.ContainerPort().WithName(PortName).WithContainerPort(gw.Spec.PortOrDefault()).WithProtocol(corev1.ProtocolTCP)).
		WithStartupProbe(startup).
		WithReadinessProbe(readiness).
		WithLivenessProbe(liveness).
		WithSecurityContext(containerSecurityContext()).
		WithEnv(resourceEnv(gw)...)
	if res := resources(gw.Spec.Resources); res != nil {
		container.WithResources(res)
	} else {
		container.WithResources(defaultResources())
	}
	mounts, volumes := podVolumes(gw, rendered, true)
	container.WithVolumeMounts(mounts...)
	pod := corev1ac.PodSpec().
		WithTerminationGracePeriodSeconds(plan.GracePeriodSeconds).
		// The gateway never talks to the Kubernetes API, and needs no Service's address
		// in its environment.
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithContainers(container).
		WithVolumes(volumes...)
	scheduling(gw, pod)
	pod.WithTopologySpreadConstraints(SpreadConstraints(gw, matchLabelKeys...)...)
	return corev1ac.PodTemplateSpec().
		WithLabels(Labels(gw)).
		WithAnnotations(map[string]string{AnnotationConfigHash: configHash}).
		WithSpec(pod)
}

// resourceEnv are the variables the gateway puts in its spans' resource
// (gateway/tracing, config.EnvPodName...): the pod's name and namespace from the downward API, and the
// Gateway's name. Set on every gateway container, traced or not: they cost nothing
// without [tracing], and an inline [tracing] gets them too.
func resourceEnv(gw *ferrofedv1alpha1.Gateway) []*corev1ac.EnvVarApplyConfiguration {
	fieldRef := func(path string) *corev1ac.EnvVarSourceApplyConfiguration {
		return corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath(path))
	}
	return []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName(config.EnvPodName).WithValueFrom(fieldRef("metadata.name")),
		corev1ac.EnvVar().WithName(config.EnvPodNamespace).WithValueFrom(fieldRef("metadata.namespace")),
		corev1ac.EnvVar().WithName(config.EnvGatewayName).WithValue(gw.Name),
	}
}

// scheduling gives pod the Gateway's node selector, tolerations and affinity.
func scheduling(gw *ferrofedv1alpha1.Gateway, pod *corev1ac.PodSpecApplyConfiguration) {
	if len(gw.Spec.NodeSelector) > 0 {
		pod.WithNodeSelector(gw.Spec.NodeSelector)
	}
	for i := range gw.Spec.Tolerations {
		pod.WithTolerations(toleration(gw.Spec.Tolerations[i]))
	}
	if gw.Spec.Affinity != nil {
		pod.WithAffinity(affinity(gw.Spec.Affinity))
	}
}

// The topology keys of the default spread constraints: the node, and the zone of a
// cluster whose nodes carry the well-known label.
const (
	SpreadNodeKey = corev1.LabelHostname
	SpreadZoneKey = corev1.LabelTopologyZone
)

// SpreadConstraints are the gateway pods' topology spread constraints:
// spec.topologySpreadConstraints when set, each without a labelSelector given the pods'
// selector labels; otherwise maxSkew 1 across nodes and across zones, both
// ScheduleAnyway, so that a cluster of one node, or of nodes without a zone label,
// still schedules every pod (docs/operator.md, "Autoscaling and spread").
// matchLabelKeys go into the defaults only.
func SpreadConstraints(gw *ferrofedv1alpha1.Gateway, matchLabelKeys ...string) []*corev1ac.TopologySpreadConstraintApplyConfiguration {
	selector := func() *metav1ac.LabelSelectorApplyConfiguration {
		return metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(gw))
	}
	var out []*corev1ac.TopologySpreadConstraintApplyConfiguration
	for _, c := range gw.Spec.TopologySpreadConstraints {
		ac := asApplyConfiguration[corev1ac.TopologySpreadConstraintApplyConfiguration](c)
		if ac.LabelSelector == nil {
			ac.WithLabelSelector(selector())
		}
		out = append(out, ac)
	}
	if len(out) > 0 {
		return out
	}
	for _, key := range []string{SpreadNodeKey, SpreadZoneKey} {
		c := corev1ac.TopologySpreadConstraint().
			WithMaxSkew(1).
			WithTopologyKey(key).
			WithWhenUnsatisfiable(corev1.ScheduleAnyway).
			WithLabelSelector(selector())
		if len(matchLabelKeys) > 0 {
			c.WithMatchLabelKeys(matchLabelKeys...)
		}
		out = append(out, c)
	}
	return out
}

func containerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}

// podVolumes are the gateway pod's volumes and the container's mounts of them: the
// configuration, /tmp, the page-token key, the stored queries, spec.secretMounts and the
// TLS Secrets, and, with withSpool, the spool (an emptyDir, or with a persistent spool
// the mount of the StatefulSet's claim, SpoolVolumeName). A hand-over Job mounts the
// same, its claim in the spool's place.
func podVolumes(gw *ferrofedv1alpha1.Gateway, rendered []byte, withSpool bool) ([]*corev1ac.VolumeMountApplyConfiguration, []*corev1ac.VolumeApplyConfiguration) {
	mounts := []*corev1ac.VolumeMountApplyConfiguration{
		corev1ac.VolumeMount().
			WithName("config").
			WithMountPath(gatewayspec.ConfigPath).
			WithSubPath(gatewayspec.ConfigFileName).
			WithReadOnly(true),
		// The root filesystem is read-only; /tmp is the process's scratch space.
		corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
	}
	// The operator's key set, where its [[auth.issuers]] entry reads it.
	if bytes.Contains(rendered, []byte(gatewayspec.OperatorJWKSFile)) {
		mounts = append(mounts, corev1ac.VolumeMount().WithName("config").WithMountPath(gatewayspec.OperatorJWKSFile).
			WithSubPath(gatewayspec.OperatorJWKSKey).WithReadOnly(true))
	}
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(gw.Name)),
		corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
	}
	// The page-token key every replica shares (federation.page_token_key_file).
	mounts = append(mounts, corev1ac.VolumeMount().WithName("page-token").WithMountPath(gatewayspec.PageTokenDir).WithReadOnly(true))
	volumes = append(volumes, corev1ac.Volume().WithName("page-token").WithSecret(corev1ac.SecretVolumeSource().
		WithSecretName(gatewayspec.PageTokenSecretName(gw.Name)).
		WithItems(corev1ac.KeyToPath().WithKey(gatewayspec.PageTokenKey).WithPath(gatewayspec.PageTokenKey))))
	// The audit spools (audit.spool_dir): an emptyDir, which outlives the container's
	// restarts within the pod, bounded by spec.audit.spool.sizeLimit; or, with
	// spec.audit.spool.volumeClaimTemplate, the replica's own claim (the StatefulSet's
	// volumeClaimTemplates), which outlives the pod (docs/audit-spool.md).
	m := config.MountsOf(rendered)
	switch {
	case !withSpool:
	case gw.Spec.PersistentSpool():
		mounts = append(mounts, corev1ac.VolumeMount().WithName(SpoolVolumeName).WithMountPath(gatewayspec.AuditSpoolDir))
	case m.AuditSpools > 0:
		limit := gw.Spec.SpoolSizeLimit()
		mounts = append(mounts, corev1ac.VolumeMount().WithName("audit-spool").WithMountPath(gatewayspec.AuditSpoolDir))
		volumes = append(volumes, corev1ac.Volume().WithName("audit-spool").WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(limit)))
	}
	// The stored queries (stored_queries.dir): the ConfigMap of the Gateway's
	// StoredQuery resources, read-only, so that every replica reads the same store;
	// optional, since it is made with the first StoredQuery (an empty store until then).
	if m.StoredQueries {
		mounts = append(mounts, corev1ac.VolumeMount().WithName("stored-queries").WithMountPath(gatewayspec.StoredQueriesDir).WithReadOnly(true))
		volumes = append(volumes, corev1ac.Volume().WithName("stored-queries").WithConfigMap(corev1ac.ConfigMapVolumeSource().
			WithName(gatewayspec.StoredQueriesConfigMapName(gw.Name)).WithOptional(true)))
	}
	// spec.secretMounts: each Secret whole, read-only; the kubelet reads it, not the
	// operator.
	for i, sm := range gw.Spec.SecretMounts {
		name := fmt.Sprintf("secret-mount-%d", i)
		mounts = append(mounts, corev1ac.VolumeMount().WithName(name).WithMountPath(sm.MountPath).WithReadOnly(true))
		volumes = append(volumes, corev1ac.Volume().WithName(name).WithSecret(corev1ac.SecretVolumeSource().WithSecretName(sm.SecretName)))
	}
	// spec.tracing's Secrets: only the key named, under a fixed file name, read-only,
	// like the client CA (tracing.headers_file, tracing.ca_file).
	if tr := gw.Spec.Tracing; tr != nil {
		if h := tr.HeadersSecret; h != nil {
			mounts = append(mounts, corev1ac.VolumeMount().WithName("tracing-headers").WithMountPath(gatewayspec.TracingHeadersDir).WithReadOnly(true))
			volumes = append(volumes, corev1ac.Volume().WithName("tracing-headers").WithSecret(corev1ac.SecretVolumeSource().
				WithSecretName(h.Name).
				WithItems(corev1ac.KeyToPath().WithKey(h.Key).WithPath(gatewayspec.TracingHeadersFileName))))
		}
		if ca := tr.CASecret; ca != nil {
			mounts = append(mounts, corev1ac.VolumeMount().WithName("tracing-ca").WithMountPath(gatewayspec.TracingCADir).WithReadOnly(true))
			volumes = append(volumes, corev1ac.Volume().WithName("tracing-ca").WithSecret(corev1ac.SecretVolumeSource().
				WithSecretName(ca.Name).
				WithItems(corev1ac.KeyToPath().WithKey(ca.KeyOrDefault()).WithPath(gatewayspec.TracingCAFileName))))
		}
	}
	if tls := gw.Spec.TLS; tls != nil {
		mounts = append(mounts, corev1ac.VolumeMount().WithName("tls").WithMountPath(gatewayspec.TLSDir).WithReadOnly(true))
		// Only the key pair: a Secret without both keys fails the mount (the pod says
		// so), and its other keys never reach the image the Gateway's author chose.
		volumes = append(volumes, corev1ac.Volume().WithName("tls").WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(tls.SecretName).
			WithItems(
				corev1ac.KeyToPath().WithKey(corev1.TLSCertKey).WithPath(corev1.TLSCertKey),
				corev1ac.KeyToPath().WithKey(corev1.TLSPrivateKeyKey).WithPath(corev1.TLSPrivateKeyKey))))
		// The client CA, under a fixed file name whatever its key; and the identity the
		// exec probes present. Only the keys named, read-only, like the key pair.
		if ca := tls.ClientCASecret; ca != nil {
			mounts = append(mounts, corev1ac.VolumeMount().WithName("client-ca").WithMountPath(gatewayspec.ClientCADir).WithReadOnly(true))
			volumes = append(volumes, corev1ac.Volume().WithName("client-ca").WithSecret(corev1ac.SecretVolumeSource().
				WithSecretName(ca.Name).
				WithItems(corev1ac.KeyToPath().WithKey(ca.KeyOrDefault()).WithPath(gatewayspec.ClientCAFileName))))
		}
		if id := tls.HealthcheckIdentitySecret; id != nil {
			mounts = append(mounts, corev1ac.VolumeMount().WithName("healthcheck-identity").WithMountPath(gatewayspec.HealthcheckIdentityDir).WithReadOnly(true))
			volumes = append(volumes, corev1ac.Volume().WithName("healthcheck-identity").WithSecret(corev1ac.SecretVolumeSource().
				WithSecretName(*id).
				WithItems(
					corev1ac.KeyToPath().WithKey(corev1.TLSCertKey).WithPath(corev1.TLSCertKey),
					corev1ac.KeyToPath().WithKey(corev1.TLSPrivateKeyKey).WithPath(corev1.TLSPrivateKeyKey))))
		}
	}
	return mounts, volumes
}

// Default resources of a gateway container whose Gateway sets none: a request the
// scheduler can plan with, and a memory limit that stops one pod from taking the node.
var (
	DefaultCPURequest    = resource.MustParse("100m")
	DefaultMemoryRequest = resource.MustParse("128Mi")
	DefaultMemoryLimit   = resource.MustParse("512Mi")
)

func defaultResources() *corev1ac.ResourceRequirementsApplyConfiguration {
	return corev1ac.ResourceRequirements().
		WithRequests(corev1.ResourceList{corev1.ResourceCPU: DefaultCPURequest, corev1.ResourceMemory: DefaultMemoryRequest}).
		WithLimits(corev1.ResourceList{corev1.ResourceMemory: DefaultMemoryLimit})
}

// PageTokenSecret is the Gateway's page-token Secret holding key, made once by the
// reconciler (the one owned object not applied: its key is random and must not change).
func PageTokenSecret(gw *ferrofedv1alpha1.Gateway, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      gatewayspec.PageTokenSecretName(gw.Name),
			Namespace: gw.Namespace,
			Labels:    Labels(gw),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: ferrofedv1alpha1.GroupVersion.String(), Kind: "Gateway",
				Name: gw.Name, UID: gw.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{gatewayspec.PageTokenKey: key},
	}
}

// Service exposes the gateway's port as "http", labelled and annotated with where the
// pods serve their metrics (withMetrics) unless rendered sets metrics.disabled.
func Service(gw *ferrofedv1alpha1.Gateway, rendered []byte) *corev1ac.ServiceApplyConfiguration {
	return withMetrics(corev1ac.Service(gw.Name, gw.Namespace).
		WithLabels(Labels(gw)).
		WithOwnerReferences(ownerReference(gw)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(SelectorLabels(gw)).
			WithPorts(corev1ac.ServicePort().
				WithName(PortName).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(gw.Spec.PortOrDefault()).
				WithTargetPort(intstr.FromString(PortName)))), gw, rendered)
}

// PodDisruptionBudget keeps all but one pod through voluntary disruptions. It exists
// only when the spec asks for more than one pod at the least (FloorReplicas: replicas,
// or spec.autoscaling.minReplicas); nil otherwise: with one, it would block every
// drain of the node. maxUnavailable 1 holds whatever number of pods the autoscaler
// runs.
func PodDisruptionBudget(gw *ferrofedv1alpha1.Gateway) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	if gw.Spec.FloorReplicas() <= 1 {
		return nil
	}
	return policyv1ac.PodDisruptionBudget(gw.Name, gw.Namespace).
		WithLabels(Labels(gw)).
		WithOwnerReferences(ownerReference(gw)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(gw))))
}

// HorizontalPodAutoscaler scales the gateway's Deployment between
// spec.autoscaling.minReplicas and maxReplicas on its CPU and memory targets; nil
// without spec.autoscaling.
func HorizontalPodAutoscaler(gw *ferrofedv1alpha1.Gateway) *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration {
	a := gw.Spec.Autoscaling
	if a == nil {
		return nil
	}
	target := func(name corev1.ResourceName, percent int32) *autoscalingv2ac.MetricSpecApplyConfiguration {
		return autoscalingv2ac.MetricSpec().
			WithType(autoscalingv2.ResourceMetricSourceType).
			WithResource(autoscalingv2ac.ResourceMetricSource().
				WithName(name).
				WithTarget(autoscalingv2ac.MetricTarget().
					WithType(autoscalingv2.UtilizationMetricType).
					WithAverageUtilization(percent)))
	}
	spec := autoscalingv2ac.HorizontalPodAutoscalerSpec().
		WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().
			WithAPIVersion(appsv1.SchemeGroupVersion.String()).
			WithKind("Deployment").
			WithName(gw.Name)).
		WithMinReplicas(a.MinReplicas).
		WithMaxReplicas(a.MaxReplicas)
	if cpu, ok := a.CPUTarget(); ok {
		spec.WithMetrics(target(corev1.ResourceCPU, cpu))
	}
	if mem := a.TargetMemoryUtilizationPercentage; mem != nil {
		spec.WithMetrics(target(corev1.ResourceMemory, *mem))
	}
	return autoscalingv2ac.HorizontalPodAutoscaler(gw.Name, gw.Namespace).
		WithLabels(Labels(gw)).
		WithOwnerReferences(ownerReference(gw)).
		WithSpec(spec)
}

// ReplicasOwner is the field manager that holds a Deployment's spec.replicas between
// the operator letting go of it (spec.autoscaling set) and the HorizontalPodAutoscaler
// taking it: a field no manager holds would go back to the Deployment's default, 1.
const ReplicasOwner = "ferrofed-operator-replicas"

// replicasSeed is what ReplicasOwner applies to the live Deployment of an autoscaled
// Gateway before the operator applies it without replicas, or nil when nothing needs
// handing over: when no manager but FieldOwner holds spec.replicas (replicasHeld), it
// applies the live count brought within [minReplicas, maxReplicas], which the
// autoscaler then takes over with its first change. It carries live's resourceVersion
// as a precondition: read from a cache behind the apiserver (the autoscaler has
// scaled meanwhile), it is refused with a Conflict instead of setting an older count.
func replicasSeed(gw *ferrofedv1alpha1.Gateway, live *appsv1.Deployment) *appsv1ac.DeploymentApplyConfiguration {
	a := gw.Spec.Autoscaling
	if a == nil || live == nil || replicasHeld(live) {
		return nil
	}
	n := min(max(ptr.Deref(live.Spec.Replicas, 1), a.MinReplicas), a.MaxReplicas)
	return appsv1ac.Deployment(gw.Name, gw.Namespace).
		WithResourceVersion(live.ResourceVersion).
		WithSpec(appsv1ac.DeploymentSpec().WithReplicas(n))
}
