// Command bot is shelljob's Telegram bot.
//
// Its secrets come from the environment, or from files (a mounted Secret):
// SHELLJOB_BOT_TOKEN, SHELLJOB_APP_ID and SHELLJOB_APP_HASH, or the same
// names with _FILE holding a path. SHELLJOB_ADMINS lists the admins' user
// ids, comma-separated. SHELLJOB_STREAMING is the kill switch of live
// output (on: unset, empty, 1, true, yes, on; off: 0, false, no, off); any
// other value stops the bot at startup.
//
// The session, the updates state and the settings are kept in the cluster
// (a Secret and two ConfigMaps in -namespace), so a restart neither logs in
// again nor loses updates. -dc-addr and -public-key point the bot at a
// server other than Telegram's, such as cmd/faketg.
//
// Commands become ShellJobs in -namespace, run by the operator on -pool
// or on the pool -identities maps the chat to; the bot reads their output
// and moves their files through the stream API (stream.shelljob.dev,
// internal/streamclient), which the operator serves: it reaches no worker
// pod itself. -identities names the file of who each admin is to
// Kubernetes (internal/identity, the chart's ConfigMap): the bot
// impersonates that identity for everything it does on an admin's behalf.
// Without it, every admin is their default identity.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"k8s.io/apimachinery/pkg/api/resource"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/gotd/td/crypto"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/telegram/dcs"
	"github.com/gotd/td/tg"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/botmetrics"
	"shelljob.dev/shelljob/bot/kube"
	"shelljob.dev/shelljob/bot/probes"
	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/bot/tgclient"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/outfiles"
	"shelljob.dev/shelljob/internal/streamclient"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bot:", err)
		os.Exit(1)
	}
}

// secret reads NAME from the environment, or the file NAME_FILE names.
func secret(name string) (string, error) {
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	if p := os.Getenv(name + "_FILE"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("%s_FILE: %w", name, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", fmt.Errorf("%s (or %s_FILE) is not set", name, name)
}

func run() error {
	var (
		namespace = flag.String("namespace", envOr("POD_NAMESPACE", "default"), "namespace of the bot's Secret and ConfigMaps")
		pool      = flag.String("pool", "shell", "ShellPool of the shell's commands, in chats -identities maps to none")
		idFile    = flag.String("identities", "", "file of the admins' Kubernetes identities and the chats' pools (internal/identity, the chart's shelljob-bot-identities ConfigMap); empty: every admin is user shelljob:telegram:<id>, every chat runs on -pool")
		dc        = flag.Int("dc", 2, "DC to connect to")
		dcAddr    = flag.String("dc-addr", "", "host:port of that DC; default: Telegram's")
		pubKey    = flag.String("public-key", "", "PEM file with the server's RSA public key; default: Telegram's")
		probeAddr = flag.String("health-probe-bind-address", ":8081", `address of /healthz and /readyz (ready once connected to Telegram); "0" serves none`)
		metrics   = flag.String("metrics-bind-address", ":8080", `address of the Prometheus /metrics (plain HTTP); "0" serves none`)
		verbosity = flag.Int("v", 0, "log verbosity (logr V-levels): 0 logs start-up, connections and errors, 1 also each job")
		gotdDebug = flag.Bool("gotd-debug", false, "let gotd log at debug level with -v=1 or more: every Telegram call, with the messages' text")
		goOffline = flag.Bool("go-offline", false, "stop the bot's unfinished jobs (reason Shutdown), wait up to 15 s for the running bot to deliver their finals, and exit: the chart's pre-delete hook")
		dropPools = flag.String("delete-pools", "", "with -go-offline or alone: then delete these ShellPools (comma-separated) and wait until the operator has let them go, and exit: the chart's pre-delete hook, while the operator still runs")
	)
	outputMemory := resource.QuantityValue{Quantity: *resource.NewQuantity(bot.DefaultOutputMemory, resource.BinarySI)}
	flag.Var(&outputMemory, "output-memory", "memory for the starts of the jobs' outputs, all jobs together: a final whose output was kept whole is built from memory, another is read again from the agent's spool")
	finalMemory := resource.QuantityValue{Quantity: *resource.NewQuantity(bot.DefaultFinalMemory, resource.BinarySI)}
	flag.Var(&finalMemory, "final-memory", "memory for the finals being delivered, all jobs together: each streams its output from the agent's spool into its upload, and a final waits for room before it starts")
	outFile := resource.QuantityValue{Quantity: *resource.NewQuantity(outfiles.DefaultFileBytes, resource.BinarySI)}
	flag.Var(&outFile, "files-out-file", "the most bytes of one file of $SHELLJOB_OUT sent back; a bigger one is named in a note")
	outJob := resource.QuantityValue{Quantity: *resource.NewQuantity(outfiles.DefaultJobBytes, resource.BinarySI)}
	flag.Var(&outJob, "files-out-job", "the most bytes of one command's files of $SHELLJOB_OUT sent back, all together")
	outCount := flag.Int("files-out-count", outfiles.DefaultCount, "the most files of $SHELLJOB_OUT one command sends back; a note counts the others")
	flag.Parse()
	if finalMemory.Sign() <= 0 {
		return fmt.Errorf("-final-memory %s: must be positive", finalMemory.String())
	}
	if outputMemory.Sign() < 0 {
		return fmt.Errorf("-output-memory %s: must not be negative", outputMemory.String())
	}
	files := bot.FileLimits{OutFile: outFile.Value(), OutJob: outJob.Value(), OutCount: *outCount}
	for _, f := range []struct {
		name string
		v    int64
	}{{"-files-out-file", files.OutFile}, {"-files-out-job", files.OutJob}, {"-files-out-count", int64(files.OutCount)}} {
		if f.v <= 0 {
			return fmt.Errorf("%s %d: must be positive", f.name, f.v)
		}
	}
	keptOutput := outputMemory.Value()
	if keptOutput == 0 {
		keptOutput = -1 // none: Config's zero is its default
	}
	log := crzap.New(crzap.WriteTo(os.Stderr), crzap.Level(zapcore.Level(-*verbosity)))
	// controller-runtime's cache and client-go's reflectors log through
	// its global logger.
	crlog.SetLogger(log)
	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}
	apiCfg, c, err := kubeClient(cfg)
	if err != nil {
		return err
	}
	if *goOffline || *dropPools != "" {
		if *goOffline {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			jobs, err := kube.StartCache(ctx, cfg, c.Scheme(), *namespace)
			if err != nil {
				return err
			}
			left, err := bot.GoOffline(ctx, &kube.Cluster{Client: c, Namespace: *namespace, Cache: jobs}, log.WithName("offline"))
			if err != nil {
				return err
			}
			log.Info("Offline", "undelivered", left)
		}
		if *dropPools != "" {
			return deletePools(c, *namespace, strings.Split(*dropPools, ","), log)
		}
		return nil
	}

	streaming, err := bot.ParseSwitch(bot.StreamingEnv, os.Getenv(bot.StreamingEnv))
	if err != nil {
		return err
	}
	token, err := secret("SHELLJOB_BOT_TOKEN")
	if err != nil {
		return err
	}
	appIDs, err := secret("SHELLJOB_APP_ID")
	if err != nil {
		return err
	}
	appID, err := strconv.Atoi(appIDs)
	if err != nil {
		return fmt.Errorf("SHELLJOB_APP_ID: %w", err)
	}
	appHash, err := secret("SHELLJOB_APP_HASH")
	if err != nil {
		return err
	}
	admins, err := parseAdmins(os.Getenv("SHELLJOB_ADMINS"))
	if err != nil {
		return err
	}
	identities, err := readIdentities(*idFile)
	if err != nil {
		return err
	}
	log.Info("Starting the bot", "namespace", *namespace, "pool", *pool, "dc", *dc, "dcAddr", *dcAddr,
		"admins", admins, "identities", *idFile, "streaming", streaming, "appID", appID, "verbosity", *verbosity)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	health := &probes.Health{}
	if err := probes.Serve(context.Background(), *probeAddr, health); err != nil {
		return fmt.Errorf("-health-probe-bind-address: %w", err)
	}
	opts := tgclient.Options{AppID: appID, AppHash: appHash, Token: token, DC: *dc, Log: log.WithName("telegram"), GotdDebug: *gotdDebug, Ready: health.Ready}
	stream, err := streamclient.New(cfg, streamclient.Options{Namespace: *namespace})
	if err != nil {
		return err
	}
	// The jobs' cache outlives a SIGTERM, as the client does.
	cacheCtx, stopCache := context.WithCancel(context.Background())
	defer stopCache()
	jobs, err := kube.StartCache(cacheCtx, cfg, c.Scheme(), *namespace)
	if err != nil {
		return err
	}
	people := kube.NewPeople(apiCfg, client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	cluster := &kube.Cluster{Client: c, Namespace: *namespace, Stream: stream, Cache: jobs, People: people, Identities: identities}
	opts.Session = &tgclient.SecretSession{Client: c, Name: types.NamespacedName{Namespace: *namespace, Name: "shelljob-bot-session"}}
	state := &tgclient.ConfigMapState{Client: c, Name: types.NamespacedName{Namespace: *namespace, Name: "shelljob-bot-updates"}}
	if err := state.Load(ctx); err != nil {
		return err
	}
	go state.Run(ctx)
	opts.State = state
	store := &settings.ConfigMapStore{Client: c, Name: types.NamespacedName{Namespace: *namespace, Name: "shelljob-bot-settings"}, Log: log.WithName("settings")}
	if *dcAddr != "" {
		host, port, err := net.SplitHostPort(*dcAddr)
		if err != nil {
			return fmt.Errorf("-dc-addr: %w", err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return fmt.Errorf("-dc-addr: %w", err)
		}
		opts.DCList = dcs.List{Options: []tg.DCOption{{ID: *dc, IPAddress: host, Port: p}}}
	}
	if *pubKey != "" {
		data, err := os.ReadFile(*pubKey)
		if err != nil {
			return err
		}
		keys, err := crypto.ParseRSAPublicKeys(data)
		if err != nil {
			return fmt.Errorf("-public-key: %w", err)
		}
		for _, k := range keys {
			opts.PublicKeys = append(opts.PublicKeys, telegram.PublicKey{RSA: k})
		}
	}

	b := bot.New(bot.Config{Admins: admins, Identities: identities, Streaming: streaming, Pool: *pool, OutputMemory: keptOutput, FinalMemory: finalMemory.Value(), Files: files, Log: log.WithName("bot")}, nil, cluster, store)
	if err := probes.Serve(context.Background(), *metrics, probes.Metrics(botmetrics.Collectors(b.Registry(), b.Followers(), b.OutputMemory())...)); err != nil {
		return fmt.Errorf("-metrics-bind-address: %w", err)
	}
	tc := tgclient.New(b, opts)
	b.SetTelegram(tc.API)

	// The client runs on its own context: a SIGTERM first stops the jobs
	// while it is still connected, so their finals go out.
	clientCtx, disconnect := context.WithCancel(context.Background())
	defer disconnect()
	done := make(chan error, 1)
	go func() { done <- tc.Run(clientCtx, b) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// A SIGTERM is a restart (a rollout, a drain, a deleted pod): the jobs
	// run on, and the next bot delivers them. helm uninstall stops them
	// first, through -go-offline.
	log.Info("Shutting down: the jobs run on, and the next bot delivers them")
	disconnect()
	err = <-done
	b.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// poolsGoneTimeout bounds the wait for deleted pools: the operator deletes
// their workers first (each within its grace), then lets them go.
const poolsGoneTimeout = 2 * time.Minute

// deletePools deletes the pools and waits until they are gone.
func deletePools(c client.Client, namespace string, names []string, log logr.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), poolsGoneTimeout)
	defer cancel()
	for _, name := range names {
		pool := &shellv1alpha1.ShellPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		if err := c.Delete(ctx, pool); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete pool %s: %w", name, err)
		}
	}
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &shellv1alpha1.ShellPool{})
			if err == nil {
				return false, nil
			}
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		log.Info("Pools deleted", "pools", names)
		return true, nil
	})
}

// kubeClient is a client of cfg's cluster with the ShellJob API.
// apiTimeout bounds each call of the bot's API client, so that a hung
// API server fails a command instead of holding it. Watches and the
// stream API's streams go through their own clients.
const apiTimeout = 30 * time.Second

// kubeClient is the bot's API client, and its config: the built-in types
// and shelljob's, each call bounded by apiTimeout.
func kubeClient(cfg *rest.Config) (*rest.Config, client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = apiTimeout
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := shellv1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	return cfg, c, err
}

// readIdentities reads the identities file (-identities); "" is none.
func readIdentities(path string) (*identity.Mapping, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-identities: %w", err)
	}
	m, err := identity.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("-identities %s: %w", path, err)
	}
	return m, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func parseAdmins(s string) ([]int64, error) {
	var ids []int64
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("SHELLJOB_ADMINS: %q is no user id", f)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, errors.New("SHELLJOB_ADMINS lists no admin")
	}
	return ids, nil
}
