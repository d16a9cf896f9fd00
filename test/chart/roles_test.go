package chart_test

import (
	"bufio"
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/testenv"
)

// roleTable reads the README's table of roles: each role's cells by
// column, without backticks and footnote marks.
func roleTable(t *testing.T) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(rootDir + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cells := func(line string) []string {
		var out []string
		for _, c := range strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|") {
			out = append(out, strings.TrimRight(strings.Trim(strings.TrimSpace(c), "`"), "¹²³"))
		}
		return out
	}
	rows := map[string]map[string]string{}
	var header []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case header == nil && strings.HasPrefix(line, "| role | aggregated into |"):
			header = cells(line)
		case header != nil && strings.HasPrefix(line, "|---"):
		case header != nil && strings.HasPrefix(line, "|"):
			c := cells(line)
			if len(c) != len(header) {
				t.Fatalf("README's table of roles: %d cells in %q, want %d", len(c), line, len(header))
			}
			row := map[string]string{}
			for i, h := range header {
				row[h] = c[i]
			}
			rows[c[0]] = row
		case header != nil:
			return rows
		}
	}
	t.Fatal("the README has no table of roles (a row starting | role | aggregated into |)")
	return nil
}

// right is one verb on one resource of one group.
type right struct{ group, resource, verb string }

// rightsOf is what the row of role grants: the RBAC rights its cells
// stand for, on shelljobs for "any" and on myshelljobs for "own".
func rightsOf(t *testing.T, role string, row map[string]string) map[right]bool {
	t.Helper()
	rights := map[right]bool{}
	add := func(group, resource string, verbs ...string) {
		for _, v := range verbs {
			rights[right{group, resource, v}] = true
		}
	}
	is := func(col string, values ...string) bool {
		v, ok := row[col]
		if !ok {
			t.Fatalf("the table of roles has no column %q", col)
		}
		if !slices.Contains([]string{"yes", "no", "any", "own"}, v) {
			t.Fatalf("role %s, %s: %q; want yes, no, any or own", role, col, v)
		}
		return slices.Contains(values, v)
	}
	shell, stream := shellv1alpha1.GroupVersion.Group, streamv1alpha1.GroupName
	if is("read jobs", "yes") {
		add(shell, "shelljobs", "get", "list", "watch")
		add(shell, "shelljobs/status", "get")
	}
	if is("read pools", "yes") {
		add(shell, "shellpools", "get", "list", "watch")
		add(shell, "shellpools/status", "get")
	}
	run := is("run", "yes")
	if run {
		add(shell, "shelljobs", "create")
	}
	// A patch of any job stops one's own: the stop admission policy asks
	// for the pool's stop right to stop another's (pool rights).
	switch {
	case is("stop", "own"):
		add(shell, "shelljobs", "patch")
	case !is("stop", "no"):
		t.Errorf("role %s, stop: %q; RBAC gives a patch of any job, which stops one's own, or none", role, row["stop"])
	}
	if is("delete jobs", "yes") {
		add(shell, "shelljobs", "delete")
	}
	// The own cells are rights on myshelljobs, which the owner rule
	// allows only to a job's owner who may create ShellJobs, and so only
	// to a role that runs jobs; the any cells are rights on shelljobs.
	own := func(col string) bool {
		v := is(col, "yes")
		if v != run {
			t.Errorf("role %s, %s: %q, but run is %q: the owner rule asks for create on shelljobs", role, col, row[col], row["run"])
		}
		return v
	}
	if own("read own output") {
		add(stream, streamv1alpha1.OwnResource+"/log", "get")
		add(stream, streamv1alpha1.OwnResource+"/files", "get")
	}
	if is("read any output", "yes") {
		add(stream, "shelljobs/log", "get")
		add(stream, "shelljobs/files", "get")
	}
	if own("attach own") {
		add(stream, streamv1alpha1.OwnResource+"/attach", "create")
	}
	if is("attach any", "yes") {
		add(stream, "shelljobs/attach", "create")
	}
	switch {
	case is("put files", "any"):
		add(stream, "shelljobs/files", "create", "update")
		fallthrough
	case is("put files", "own", "any"):
		if !run {
			t.Errorf("role %s, put files: %q, but run is %q: it puts files into its own jobs too", role, row["put files"], row["run"])
		}
		add(stream, streamv1alpha1.OwnResource+"/files", "create", "update")
	}
	if is("pool rights", "yes") {
		add(shell, "shellpools", "use", "stop", "restart", "approve")
	}
	if is("manage pools", "yes") {
		add(shell, "shellpools", "create", "delete", "patch", "update")
	}
	return rights
}

// aggregations are the built-in ClusterRoles the aggregated-into cell
// names.
func aggregations(cell string) []string {
	if cell == "none" {
		return nil
	}
	var out []string
	for _, r := range strings.Split(cell, ",") {
		out = append(out, strings.Trim(strings.TrimSpace(r), "`"))
	}
	slices.Sort(out)
	return out
}

// rolesMatchTheTable binds each of the chart's roles for people to a user
// of its own in the release namespace, and checks that what the API
// server lets the user do there (SelfSubjectRulesReview) is the README's
// row, no more and no less, and that the role is aggregated into the
// built-in roles the row names, and reaches no pod in the workers'
// namespace.
func rolesMatchTheTable(t *testing.T, env *testenv.Env, workers string) {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	table := roleTable(t)
	if got, want := slices.Sorted(maps.Keys(table)), []string{"shelljob-editor", "shelljob-user", "shelljob-viewer", "shellpool-editor"}; !slices.Equal(got, want) {
		t.Errorf("the README's table has the roles %q, want %q", got, want)
	}
	// What the API server's own roles give every user: not ours to check.
	ours := map[string]bool{"": true, "*": true, shellv1alpha1.GroupVersion.Group: true, streamv1alpha1.GroupName: true}
	for role, row := range table {
		t.Run(role, func(t *testing.T) {
			name := release + "-" + namespace + "-" + role
			var cr rbacv1.ClusterRole
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &cr); err != nil {
				t.Fatalf("the chart's ClusterRole %s: %v", name, err)
			}
			var agg []string
			for label, v := range cr.Labels {
				if r, ok := strings.CutPrefix(label, "rbac.authorization.k8s.io/aggregate-to-"); ok && v == "true" {
					agg = append(agg, r)
				}
			}
			slices.Sort(agg)
			if want := aggregations(row["aggregated into"]); !slices.Equal(agg, want) {
				t.Errorf("%s is aggregated into %q, the table says %q", name, agg, want)
			}
			user := "table-" + role
			if err := c.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			}); err != nil {
				t.Fatal(err)
			}
			cfg := rest.CopyConfig(env.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
			uc, err := client.New(cfg, client.Options{Scheme: env.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}
			if err := uc.Create(ctx, review); err != nil {
				t.Fatalf("SelfSubjectRulesReview as %s: %v", user, err)
			}
			got := map[right]bool{}
			for _, r := range review.Status.ResourceRules {
				for _, g := range r.APIGroups {
					if !ours[g] {
						continue
					}
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							got[right{g, res, v}] = true
						}
					}
				}
			}
			want := rightsOf(t, role, row)
			for r := range want {
				if !got[r] {
					t.Errorf("%s may not %s %s in %q, which the table grants", role, r.verb, r.resource, r.group)
				}
			}
			for r := range got {
				if !want[r] {
					t.Errorf("%s may %s %s in %q, which the table does not grant", role, r.verb, r.resource, r.group)
				}
			}
			for _, a := range []access{
				{verb: "create", resource: "pods", subresource: "exec", namespace: workers},
				{verb: "create", resource: "pods", subresource: "exec", namespace: namespace},
				{verb: "get", resource: "pods", namespace: workers},
			} {
				if allowedAs(t, c, user, []string{"system:authenticated"}, a) {
					t.Errorf("%s may %s %s/%s in %s", role, a.verb, a.resource, a.subresource, a.namespace)
				}
			}
		})
	}
}
