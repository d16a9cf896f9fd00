package controllers

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
)

const (
	// DefaultWorkerImage is the worker image of pools that name none.
	DefaultWorkerImage = "shelljob/worker:0.1.0"
	// spoolVolume is the emptyDir mounted at agentapi.SpoolDir.
	spoolVolume = "spool"
	// workerTerminationGrace is short: the operator deletes a worker only
	// once it runs no job.
	workerTerminationGrace = 5
)

// ReadyPortName names the worker container's port of the agent's readiness
// endpoint (agentapi.ReadyPort), which the readiness probe asks: an HTTP GET
// costs the node no exec, where an exec probe per worker every few seconds
// loaded a small node heavily.
const ReadyPortName = "ready"

// readinessPeriod is how often the kubelet asks a worker if it is ready.
const readinessPeriod = 5

// Environment of the agent in each worker pod, beside agentapi.ShellEnv.
const (
	EnvPool   = "SHELLJOB_POOL"
	EnvWorker = "SHELLJOB_WORKER"
)

// workerPodVersion is bumped when the pods the operator builds change in a
// way running workers must take up: an upgraded operator then replaces
// them as a pool restart does. 2: each job runs as a user of its own. 3:
// the agent learns its spool's size, and jobs get namespaces of their own
// where WorkerSecurity allows.
const workerPodVersion = 3

// WorkerSecurity is what worker pods allow their agent beyond the
// capabilities it always has (agentCapabilities), to give each job user,
// PID, mount and IPC namespaces of its own (agent/sandbox.go). Both stay
// within the baseline Pod Security profile.
type WorkerSecurity struct {
	// UserNamespaces runs each worker in a user namespace of its own
	// (hostUsers: false: root in the pod is no one on the node) with an
	// unmasked /proc (procMount: Unmasked, which baseline allows only
	// there), so that the agent may mount each job a /proc of its own. It
	// needs Kubernetes 1.36 or later (1.33 with the UserNamespacesSupport
	// gate), runc 1.2 or later, and a kernel and filesystems with idmapped
	// mounts; a cluster without them does not run the pods.
	UserNamespaces bool `json:"userNamespaces,omitempty"`
	// SeccompProfile is the worker container's Localhost seccomp profile,
	// a path below the kubelet's seccomp directory such as
	// shelljob/worker.json (hack/seccomp-profile.sh makes it): the
	// runtime's default refuses the namespaces. Empty: RuntimeDefault, and
	// jobs run in the pod's namespaces. Every node must have the file, or
	// the workers do not start.
	SeccompProfile string `json:"seccompProfile,omitempty"`
}

// workerTemplate is what makes a revision: everything of the pool that
// goes into its worker pods, plus the restart stamp and workerPodVersion.
type workerTemplate struct {
	PodVersion      int                               `json:"podVersion"`
	Image           string                            `json:"image"`
	ImagePullPolicy corev1.PullPolicy                 `json:"imagePullPolicy"`
	Resources       corev1.ResourceRequirements       `json:"resources"`
	ServiceAccount  string                            `json:"serviceAccount"`
	Template        shellv1alpha1.ShellPoolPodOverlay `json:"template"`
	Shell           string                            `json:"shell"`
	SpoolSizeLimit  *resource.Quantity                `json:"spoolSizeLimit,omitempty"`
	RestartedAt     *metav1.Time                      `json:"restartedAt"`
	Security        WorkerSecurity                    `json:"security"`
}

// DefaultSpoolSizeLimit is a pool's spool sizeLimit when its spec has none.
// The CRD defaults the field, so that is only a pool the API server did not
// default: one built in Go, or served by an older CRD.
var DefaultSpoolSizeLimit = resource.MustParse("1Gi")

// DefaultWorkerResources are the requests and limits of a worker for what
// its pool sets none of: every worker is bounded, so a command that fills
// its memory or disk ends at its own worker's limit, not its node's.
var DefaultWorkerResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("100m"),
		corev1.ResourceMemory:           resource.MustParse("128Mi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("256Mi"),
	},
	Limits: corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("2"),
		corev1.ResourceMemory:           resource.MustParse("1Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("2Gi"),
	},
}

// workerResources merges the pool's resources over DefaultWorkerResources,
// resource by resource. A default request above the pool's own limit
// comes down to that limit.
func workerResources(own corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *own.DeepCopy()
	merge := func(dst *corev1.ResourceList, def corev1.ResourceList) {
		if *dst == nil {
			*dst = corev1.ResourceList{}
		}
		for name, q := range def {
			if _, ok := (*dst)[name]; !ok {
				(*dst)[name] = q.DeepCopy()
			}
		}
	}
	defaultRequests := DefaultWorkerResources.Requests.DeepCopy()
	for name := range defaultRequests {
		if _, ok := own.Requests[name]; ok {
			continue
		}
		if limit, ok := own.Limits[name]; ok && limit.Cmp(defaultRequests[name]) < 0 {
			defaultRequests[name] = limit.DeepCopy()
		}
	}
	merge(&out.Requests, defaultRequests)
	merge(&out.Limits, DefaultWorkerResources.Limits)
	return out
}

// workerSecurity merges the pool's pod securityContext over the default
// seccomp profile: sec's Localhost one, or RuntimeDefault. The agent's
// container sets its own user (agentSecurity), so the pool's runAsUser,
// runAsGroup and runAsNonRoot do not reach it; the pool's
// supplementalGroups and fsGroup reach the agent alone, as commands start
// with no supplementary group.
func workerSecurity(own *corev1.PodSecurityContext, sec WorkerSecurity) *corev1.PodSecurityContext {
	sc := own.DeepCopy()
	if sc == nil {
		sc = &corev1.PodSecurityContext{}
	}
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		if sec.SeccompProfile != "" {
			sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(sec.SeccompProfile)}
		}
	}
	return sc
}

// agentCapabilities are all the agent's container keeps of root's
// capabilities, each for isolating jobs (agent.RequiredCapabilities):
//   - CHOWN: to hand a job's $SHELLJOB_OUT and home to the job's user, and
//     take them back when it ends, before its files are collected;
//   - KILL: to signal the process groups of jobs, which run as other users;
//   - SETGID, SETUID: to start each command as a user and group of its own,
//     with no supplementary groups.
//
// All are in the baseline Pod Security profile; restricted allows none of
// them, nor root, which is why the workers namespace enforces baseline.
// A command keeps none of them: it runs as another user, with no new
// privileges (allowPrivilegeEscalation false, so no setuid binary helps).
var agentCapabilities = []corev1.Capability{"CHOWN", "KILL", "SETGID", "SETUID"}

// agentSecurity is the agent container's securityContext: root, to run
// each job as a user of its own, with agentCapabilities alone, and in a
// user namespace an unmasked /proc.
func agentSecurity(sec WorkerSecurity) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		RunAsUser:                ptr.To[int64](0),
		RunAsGroup:               ptr.To[int64](0),
		RunAsNonRoot:             ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: slices.Clone(agentCapabilities)},
	}
	if sec.UserNamespaces {
		sc.ProcMount = ptr.To(corev1.UnmaskedProcMount)
	}
	return sc
}

func templateOf(pool *shellv1alpha1.ShellPool, defaultImage string, sec WorkerSecurity) workerTemplate {
	t := workerTemplate{
		Security:        sec,
		PodVersion:      workerPodVersion,
		Image:           pool.Spec.Image,
		ImagePullPolicy: pool.Spec.ImagePullPolicy,
		Resources:       workerResources(pool.Spec.Resources),
		ServiceAccount:  pool.Spec.ServiceAccountName,
		Template:        pool.Spec.Template,
		Shell:           pool.Spec.Shell,
		SpoolSizeLimit:  pool.Spec.SpoolSizeLimit,
		RestartedAt:     pool.Spec.RestartedAt,
	}
	if t.SpoolSizeLimit == nil {
		t.SpoolSizeLimit = &DefaultSpoolSizeLimit
	}
	if t.Image == "" {
		t.Image = defaultImage
	}
	if t.ImagePullPolicy == "" {
		t.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if t.Shell == "" {
		t.Shell = agentapi.DefaultShell
	}
	return t
}

// Revision is the pool's current revision: a short hash of its worker
// template and restart stamp, as a Deployment's pod-template-hash.
func Revision(pool *shellv1alpha1.ShellPool, defaultImage string, sec WorkerSecurity) string {
	data, err := json.Marshal(templateOf(pool, defaultImage, sec))
	if err != nil {
		panic(fmt.Sprintf("marshal a worker template: %v", err))
	}
	h := fnv.New32a()
	_, _ = h.Write(data)
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// hostUsers is the pod's hostUsers: false in a user namespace of its own,
// unset (the node's users) otherwise.
func hostUsers(sec WorkerSecurity) *bool {
	if sec.UserNamespaces {
		return ptr.To(false)
	}
	return nil
}

// workerName is the name of a pool's worker pod.
func workerName(pool, revision string, index int32) string {
	return fmt.Sprintf("%s-%s-%d", pool, revision, index)
}

// workerNamespace is where the workers of pools in ns live: configured,
// the operator's worker namespace, or else the pools' own.
func workerNamespace(configured, ns string) string {
	if configured != "" {
		return configured
	}
	return ns
}

// workerLabels select the worker pods of a pool, in its worker namespace.
func workerLabels(pool *shellv1alpha1.ShellPool) client.MatchingLabels {
	return client.MatchingLabels{shellv1alpha1.LabelPool: pool.Name, shellv1alpha1.LabelPoolNamespace: pool.Namespace}
}

// ownedBy tells whether the pool made the pod: a pool of the same name made
// before it does not own it.
func ownedBy(pod *corev1.Pod, pool *shellv1alpha1.ShellPool) bool {
	return pod.Labels[shellv1alpha1.LabelPoolUID] == string(pool.UID)
}

// poolOf is the pool of a worker pod, from its labels; false if it has none.
func poolOf(pod client.Object) (types.NamespacedName, bool) {
	l := pod.GetLabels()
	name, ok := l[shellv1alpha1.LabelPool]
	if !ok {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: cmp.Or(l[shellv1alpha1.LabelPoolNamespace], pod.GetNamespace()), Name: name}, true
}

// workerPod builds worker index of the pool's revision, in namespace ns.
func workerPod(pool *shellv1alpha1.ShellPool, ns, revision string, index int32, defaultImage string, sec WorkerSecurity) *corev1.Pod {
	t := templateOf(pool, defaultImage, sec)
	labels := maps.Clone(t.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, map[string]string{
		"app.kubernetes.io/name":         "shelljob-worker",
		"app.kubernetes.io/managed-by":   "shelljob-operator",
		shellv1alpha1.LabelPool:          pool.Name,
		shellv1alpha1.LabelPoolNamespace: pool.Namespace,
		shellv1alpha1.LabelPoolUID:       string(pool.UID),
		shellv1alpha1.LabelRevision:      revision,
		shellv1alpha1.LabelWorker:        strconv.Itoa(int(index)),
	})
	var automount *bool
	if t.ServiceAccount == "" {
		automount = ptr.To(false)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        workerName(pool.Name, revision, index),
			Labels:      labels,
			Annotations: maps.Clone(t.Template.Annotations),
		},
		Spec: corev1.PodSpec{
			// A worker that dies is replaced, not restarted in place: its
			// jobs end as WorkerLost, and a fresh pod takes its place.
			RestartPolicy:                 corev1.RestartPolicyNever,
			ServiceAccountName:            t.ServiceAccount,
			AutomountServiceAccountToken:  automount,
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](workerTerminationGrace),
			SecurityContext:               workerSecurity(t.Template.SecurityContext, sec),
			HostUsers:                     hostUsers(sec),
			NodeSelector:                  t.Template.NodeSelector,
			Tolerations:                   t.Template.Tolerations,
			Containers: []corev1.Container{{
				Name:            agentapi.WorkerContainer,
				Image:           t.Image,
				ImagePullPolicy: t.ImagePullPolicy,
				Command:         []string{agentapi.AgentPath},
				// The agent refuses to serve rather than run jobs unisolated.
				Args: []string{"serve", fmt.Sprintf("--ready-addr=:%d", agentapi.ReadyPort), "--isolation=required"},
				Ports: []corev1.ContainerPort{{
					Name: ReadyPortName, ContainerPort: agentapi.ReadyPort, Protocol: corev1.ProtocolTCP,
				}},
				Env: []corev1.EnvVar{
					{Name: EnvPool, Value: pool.Name},
					{Name: EnvWorker, Value: strconv.Itoa(int(index))},
					{Name: agentapi.ShellEnv, Value: t.Shell},
					// The agent keeps the spools within a budget below it.
					{Name: agentapi.SpoolSizeLimitEnv, Value: strconv.FormatInt(t.SpoolSizeLimit.Value(), 10)},
				},
				Resources: t.Resources,
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: agentapi.ReadyPath, Port: intstr.FromString(ReadyPortName),
					}},
					PeriodSeconds:    readinessPeriod,
					TimeoutSeconds:   2,
					FailureThreshold: 3,
				},
				SecurityContext: agentSecurity(sec),
				VolumeMounts:    []corev1.VolumeMount{{Name: spoolVolume, MountPath: agentapi.SpoolDir}},
			}},
			Volumes: []corev1.Volume{{
				Name:         spoolVolume,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(t.SpoolSizeLimit.DeepCopy())}},
			}},
		},
	}
}
