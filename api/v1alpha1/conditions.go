package v1alpha1

// Condition types of a Gateway's status.
const (
	// ConditionReady is True when the Deployment has as many ready pods as
	// spec.replicas asks for, with the configuration of the current generation.
	ConditionReady = "Ready"
	// ConditionProgressing is True while the Deployment rolls out a new pod template
	// or scales; False once the rollout is complete.
	ConditionProgressing = "Progressing"
	// ConditionConfigValid is True when the rendered ferrofed.toml passes the
	// gateway's own `config check`; False when it does not, and then nothing is rolled out.
	ConditionConfigValid = "ConfigValid"
	// ConditionDrainsComplete is True when the newest drain in status.drains completed,
	// False when it was cut or the container was killed (the message names the pod and
	// how long its drain needed), and Unknown before any pod of the Gateway drained.
	ConditionDrainsComplete = "DrainsComplete"
	// ConditionAuditDelivering is about the persistent spool's claims (status.audit):
	// False, with the count, while an orphaned claim holds records not yet handed over
	// or a hand-over Job failed; True otherwise; Unknown when the Gateway has no claims.
	ConditionAuditDelivering = "AuditDelivering"
	// ConditionMembersReachable is from the pods' dependency reports: True when every
	// replica read reports every member endpoint up, False naming the endpoints a
	// replica reports down or failing, Unknown when no report was read.
	ConditionMembersReachable = "MembersReachable"
	// ConditionBindingsHealthy is from the same reports: True when every replica read
	// reports every binding up, False naming the others, Unknown when none was read.
	ConditionBindingsHealthy = "BindingsHealthy"
)

// Condition reasons.
const (
	// ReasonAllMembersReachable surfaces on MembersReachable=True.
	ReasonAllMembersReachable = "AllMembersReachable"
	// ReasonMembersDown surfaces on MembersReachable=False; the message names the
	// endpoints (at most 10) and on how many replicas each is down or failing.
	ReasonMembersDown = "MembersDown"
	// ReasonAllBindingsUp surfaces on BindingsHealthy=True (a Gateway without
	// bindings too).
	ReasonAllBindingsUp = "AllBindingsUp"
	// ReasonBindingsUnhealthy surfaces on BindingsHealthy=False; the message names
	// each binding a replica does not report up, with its state.
	ReasonBindingsUnhealthy = "BindingsUnhealthy"
	// ReasonNotPolled surfaces on MembersReachable and BindingsHealthy=Unknown: polling
	// is off, the Gateway has no ready pod, or no pod's report could be read.
	ReasonNotPolled = "NotPolled"
	// ReasonAuditDegraded surfaces on AuditDelivering=False when a replica has
	// reported its audit destination (audit_repository or audit_feed) not up in two
	// polls in a row: its records wait in the spool.
	ReasonAuditDegraded = "AuditDegraded"

	// ReasonConfigValid surfaces on ConfigValid=True: the rendered configuration passed.
	ReasonConfigValid = "ConfigValid"
	// ReasonInvalidConfig surfaces on ConfigValid=False (and Ready/Progressing=False when
	// no Deployment exists yet) when the rendered configuration is refused; the
	// message is the configuration's own problem list.
	ReasonInvalidConfig = "InvalidConfig"
	// ReasonConfigMapNotFound surfaces on ConfigValid=False when spec.config.configMapRef
	// names a ConfigMap, or a key, that does not exist.
	ReasonConfigMapNotFound = "ConfigMapNotFound"

	// ReasonReplicasReady surfaces on Ready=True: every desired pod is ready.
	ReasonReplicasReady = "ReplicasReady"
	// ReasonReplicasNotReady surfaces on Ready=False while fewer pods than desired are ready.
	ReasonReplicasNotReady = "ReplicasNotReady"
	// ReasonDeploymentNotFound surfaces on Ready=False and Progressing=False when the
	// Deployment does not exist (yet).
	ReasonDeploymentNotFound = "DeploymentNotFound"

	// ReasonNameConflict surfaces on Ready=False when an object the Gateway would own
	// (its ConfigMap, Deployment, Service or PodDisruptionBudget, all named after it)
	// already exists and is not controlled by this Gateway: the operator never adopts
	// it, and the message names it. Nothing after it is applied.
	ReasonNameConflict = "NameConflict"
	// ReasonApplyFailed surfaces on Ready=False when the apiserver refused an owned
	// object; the message is the kind, the name and the apiserver's own message.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonStatefulSetRecreating surfaces on Ready=False while the StatefulSet of a
	// persistent spool is deleted with propagationPolicy Orphan (its pods keep running)
	// to be created again with fields the apiserver does not change on a StatefulSet (a
	// changed volumeClaimTemplate); the message names the change, and that the existing
	// claims keep their size.
	ReasonStatefulSetRecreating = "StatefulSetRecreating"
	// ReasonImageNotAllowed surfaces on Ready=False when spec.image matches none of the
	// operator's --allowed-images patterns; nothing is rolled out.
	ReasonImageNotAllowed = "ImageNotAllowed"

	// ReasonDrainCompleted surfaces on DrainsComplete=True.
	ReasonDrainCompleted = "DrainCompleted"
	// ReasonDrainCut surfaces on DrainsComplete=False when the newest drain closed
	// connections at its shutdown timeout.
	ReasonDrainCut = "DrainCut"
	// ReasonDrainKilled surfaces on DrainsComplete=False when the newest drain's
	// container was killed (or failed) before it reported: the grace period was too short.
	ReasonDrainKilled = "DrainKilled"
	// ReasonDrainUnreported surfaces on DrainsComplete=Unknown when the newest drain's
	// container exited cleanly without a report.
	ReasonDrainUnreported = "DrainUnreported"
	// ReasonNoDrainYet surfaces on DrainsComplete=Unknown before any pod drained.
	ReasonNoDrainYet = "NoDrainYet"

	// ReasonNoSpoolClaims surfaces on AuditDelivering=Unknown: the Gateway has no
	// spool claims (an emptyDir spool, or none yet).
	ReasonNoSpoolClaims = "NoSpoolClaims"
	// ReasonNothingWaiting surfaces on AuditDelivering=True: no orphaned claim holds
	// records, and no hand-over failed.
	ReasonNothingWaiting = "NothingWaiting"
	// ReasonHandOverPending surfaces on AuditDelivering=False while orphaned claims
	// hold records (or have not reported) and their hand-over has not ended.
	ReasonHandOverPending = "HandOverPending"
	// ReasonHandOverFailed surfaces on AuditDelivering=False when a hand-over Job
	// failed: the claim is kept and a new Job is started after a backoff.
	ReasonHandOverFailed = "HandOverFailed"
	// ReasonRetiringPodsDelivering surfaces on AuditDelivering=False while pods the
	// Gateway retired (status.audit.retiringPods) still hold records in their emptyDir
	// spools, or their backlog could not be read.
	ReasonRetiringPodsDelivering = "RetiringPodsDelivering"
	// ReasonQuarantineLeft surfaces on AuditDelivering=False when a hand-over Job
	// delivered everything it could and only quarantined records are left: no Job is
	// started again for that claim, which waits for a person to release it (the
	// annotation ferrofed.io/release-quarantine=true) or to delete it.
	ReasonQuarantineLeft = "QuarantineLeft"

	// ReasonRollingOut surfaces on Progressing=True while the Deployment has not
	// observed or finished rolling out its latest pod template.
	ReasonRollingOut = "RollingOut"
	// ReasonRolloutComplete surfaces on Progressing=False once every pod runs the
	// latest pod template.
	ReasonRolloutComplete = "RolloutComplete"
)
