// Package bot is the Telegram bot of shelljob: chat admins send .a CMD, the
// command becomes a ShellJob, and its output shows live in the chat until
// its final. The behaviour is the reference's (reference/shell_streaming.md);
// this package holds the handlers and the pump of each job. It reaches the
// cluster through the narrow interface Cluster, and Telegram through
// requests that a Sender builds, in gotd's style
// (b.tg.To(chat).Reply(id).Text(ctx, text)), and Telegram carries out.
package bot

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/command"
	"shelljob.dev/shelljob/bot/followers"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/outfiles"
	"shelljob.dev/shelljob/internal/texts"
)

// ShutdownTimeout is how long a shutdown waits for the finals of the jobs
// it stopped, while the bot is still connected.
const ShutdownTimeout = 15 * time.Second

// DefaultInFileBytes is the default limit of a replied-to file
// (FileLimits.InFile). The files go through the bot: a replied-to file is
// kept in a temporary file until its job has it, and the files of
// $SHELLJOB_OUT are streamed, within outfiles' limits, but a chat is no
// place for a file of gigabytes either.
const DefaultInFileBytes = 50 << 20

// FileLimits caps the files a job takes in and gives back.
type FileLimits struct {
	// InFile is the most bytes of a replied-to file; a bigger one is
	// refused before its download. Defaults to DefaultInFileBytes.
	InFile int64
	// OutFile is the most bytes of one $SHELLJOB_OUT file sent back.
	// Defaults to outfiles.DefaultFileBytes.
	OutFile int64
	// OutJob is the most bytes of one job's $SHELLJOB_OUT files sent back.
	// Defaults to outfiles.DefaultJobBytes.
	OutJob int64
	// OutCount is the most $SHELLJOB_OUT files of one job sent back; a
	// note counts the others. Defaults to outfiles.DefaultCount.
	OutCount int
}

// Out is the limits of the files sent back.
func (l FileLimits) Out() outfiles.Limits {
	return outfiles.Limits{File: l.OutFile, Job: l.OutJob, Count: l.OutCount}.WithDefaults()
}

func (l *FileLimits) setDefaults() {
	l.InFile = cmp.Or(l.InFile, DefaultInFileBytes)
	out := l.Out()
	l.OutFile, l.OutJob, l.OutCount = out.File, out.Job, out.Count
}

// Config configures a Bot.
type Config struct {
	// Admins are the user ids allowed to use the bot.
	Admins []int64
	// Identities says who each admin is to Kubernetes, which the bot
	// impersonates for everything it does on their behalf, and which pool
	// each chat runs on (the chart's bot.identities and bot.chats). nil:
	// every admin is their default identity, every chat runs on Pool.
	Identities *identity.Mapping
	// Streaming is the kill switch: off means no preview, no renderer and
	// one final reply.
	Streaming bool
	// Pool is the ShellPool of the shell's commands in a chat that
	// Identities maps to none. Defaults to "shell".
	Pool string
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Log defaults to a discarding logger.
	Log logr.Logger
	// Files caps the files the bot moves; each zero field takes its
	// default.
	Files FileLimits
	// OutputMemory is how many bytes of its jobs' output starts the bot
	// keeps in memory, all jobs together, for finals built without reading
	// the spool again. Each job keeps its preview's window besides.
	// Defaults to DefaultOutputMemory; negative keeps none.
	OutputMemory int64
	// FinalMemory is how many bytes the finals being delivered hold, all
	// together: a final's output streams from the agent's spool into its
	// upload, and a final waits for room before it starts. Defaults to
	// DefaultFinalMemory.
	FinalMemory int64
	// FinalRetry spaces the tries of a final's Telegram call that failed
	// for want of Telegram (ErrUnavailable). Zero takes
	// DefaultFinalRetry.
	FinalRetry wait.Backoff
}

// DefaultOutputMemory keeps the output starts of 64 jobs.
const DefaultOutputMemory = 64 * keptBytes

// Bot answers the admins' messages. Create it with New, set its names with
// SetNames once the bot's profile is known, and feed it the updates.
type Bot struct {
	cfg Config
	tg  Sender
	// finals sends the finals with finalPatience(), trying a call again
	// while Telegram is unavailable: a final that is not sent is lost.
	finals   Sender
	cluster  Cluster
	settings settings.Store
	registry *jobs.Registry
	admins   map[int64]bool

	// chats are the chats the bot has seen, to reach a pool's approvers'
	// chat by its id.
	chats chatBook

	mu      sync.Mutex
	names   command.Names
	primary string
	ctx     context.Context // the pumps' context, set by Run
	pumps   sync.WaitGroup
	// outputMemory is the memory the jobs' kept output starts share.
	outputMemory *liveoutput.Budget
	// followers are the jobs' output followers; each pump starts and
	// stops its own.
	followers *followers.Set
	// finalMemory is the memory the finals being delivered share.
	finalMemory *finalMemory
}

// New returns a Bot.
func New(cfg Config, t Telegram, c Cluster, s settings.Store) *Bot {
	if cfg.Pool == "" {
		cfg.Pool = shellv1alpha1.DefaultPool
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	cfg.Files.setDefaults()
	if cfg.OutputMemory == 0 {
		cfg.OutputMemory = DefaultOutputMemory
	}
	if cfg.FinalMemory <= 0 {
		cfg.FinalMemory = DefaultFinalMemory
	}
	if cfg.FinalRetry.Steps == 0 {
		cfg.FinalRetry = DefaultFinalRetry
	}
	b := &Bot{cfg: cfg, cluster: c, settings: s, registry: jobs.NewRegistry(), admins: map[int64]bool{}, ctx: context.Background(),
		outputMemory: liveoutput.NewBudget(cfg.OutputMemory), followers: new(followers.Set), finalMemory: newFinalMemory(cfg.FinalMemory)}
	for _, a := range cfg.Admins {
		b.admins[a] = true
	}
	b.SetTelegram(t)
	return b
}

// SetNames records the bot's usernames, read from its profile at startup:
// the primary username ("" for none) and the active aliases.
func (b *Bot) SetNames(primary string, aliases []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.names = nil
	if primary != "" {
		b.names = append(b.names, primary)
	}
	b.names = append(b.names, aliases...)
	b.primary = primary
	if b.primary == "" && len(aliases) > 0 {
		b.primary = aliases[0]
	}
}

func (b *Bot) nameSet() (command.Names, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.names, b.primary
}

// SetTelegram sets the Telegram the bot talks to, when it is built after
// the bot (the gotd client needs the bot for its handlers).
func (b *Bot) SetTelegram(t Telegram) {
	b.tg = NewSender(t)
	b.finals = b.tg.Patient(b.finalPatience())
}

// finalPatience is how long a final's calls wait for Telegram.
func (b *Bot) finalPatience() Patience {
	return Patience{Backoff: b.cfg.FinalRetry, Clock: b.cfg.Clock}
}

// Registry returns the bot's job registry.
func (b *Bot) Registry() *jobs.Registry { return b.registry }

// Followers returns the set of the jobs' output followers.
func (b *Bot) Followers() *followers.Set { return b.followers }

// OutputMemory is the memory the jobs' kept output starts share.
func (b *Bot) OutputMemory() *liveoutput.Budget { return b.outputMemory }

// shuttingDown tells whether a shutdown has begun: new jobs are then
// created stopped, so their commands never run.
func (b *Bot) shuttingDown() bool { return b.registry.Closed() }

// Start sets the context of the jobs' pumps and picks up the jobs a
// previous run left undelivered: their previews come back and their finals
// are delivered. Cancelling ctx abandons the pumps (the disconnect).
func (b *Bot) Start(ctx context.Context) error {
	b.mu.Lock()
	b.ctx = ctx
	b.mu.Unlock()
	return b.resume(ctx)
}

func (b *Bot) pumpCtx() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctx
}

// Shutdown stops every job with reason Shutdown and waits up to
// ShutdownTimeout for their finals. Jobs that arrive meanwhile are stopped
// before they run. It returns how many were not delivered in time.
func (b *Bot) Shutdown() int {
	wait := b.cfg.Clock.After(ShutdownTimeout)
	b.registry.Close()
	ctx, cancel := context.WithTimeout(b.pumpCtx(), ShutdownTimeout)
	defer cancel()
	for _, j := range b.registry.All() {
		if _, err := b.stopOffline(ctx, j); err != nil {
			b.cfg.Log.Error(err, "Could not stop a job: the bot is going offline", "job", j.Name)
		}
	}
	left := b.registry.WaitAll(wait)
	if left > 0 {
		b.cfg.Log.Info("Jobs not delivered before the shutdown timeout", "jobs", left)
	}
	return left
}

// Wait waits for every pump and every output follower to return.
func (b *Bot) Wait() {
	b.pumps.Wait()
	b.followers.Wait()
}

// Commands is the bot's command menu, set at startup.
var Commands = []struct{ Command, Description string }{
	{"help", "The shell's commands"},
	{"settings", "Live output and final settings"},
}

// Message is a chat message the bot received.
type Message struct {
	Chat Chat
	ID   int
	From int64
	Text string
	// Forwarded messages are never commands.
	Forwarded bool
	// ReplyTo is the message this one really replies to (in a topic, not
	// the topic's own header), 0 for none.
	ReplyTo int
	// Date is when it was sent: with the chat and ID, it names the job.
	Date time.Time
}

// Callback is a press of an inline button.
type Callback struct {
	QueryID int64
	From    int64
	Chat    Chat
	MsgID   int
	Data    string
}

// GuestQuery is a message that mentions the bot in a guest chat.
type GuestQuery struct {
	QueryID int64
	From    int64
	Text    string
	// Chat is the guest chat, Private whether it is a private chat (for
	// the edit pace).
	Chat    int64
	Private bool
	// Date is when the query's message was sent.
	Date time.Time
}

func (b *Bot) isAdmin(u int64) bool { return b.admins[u] }

// identityOf is who the chat admin tg is to Kubernetes.
func (b *Bot) identityOf(tg int64) identity.Identity { return b.cfg.Identities.Of(tg) }

// as is the cluster acting for the chat admin tg, as their identity.
func (b *Bot) as(tg int64) Person { return b.cluster.As(b.identityOf(tg)) }

// chatPool is the pool of the commands of chat (a Bot API chat id): the
// one Identities maps the chat to, else, for an admin's private chat with
// the bot, their identity's, else Config.Pool.
func (b *Bot) chatPool(chat int64) string {
	if pool, ok := b.cfg.Identities.PoolOf(chat); ok {
		return pool
	}
	if chat > 0 && b.isAdmin(chat) {
		if pool := b.identityOf(chat).Pool; pool != "" {
			return pool
		}
	}
	return b.cfg.Pool
}

// HandleMessage answers a chat message. Errors are those of Telegram.
func (b *Bot) HandleMessage(ctx context.Context, m Message) error {
	b.chats.learn(m.Chat)
	if m.Forwarded || !b.isAdmin(m.From) {
		return nil
	}
	names, _ := b.nameSet()
	c := command.Parse(m.Text, names)
	switch c.Kind {
	case command.None:
		return nil
	case command.A:
		return b.startChatJob(ctx, m, c.Arg, shellv1alpha1.ModeFork)
	case command.AF:
		return b.startChatJob(ctx, m, c.Arg, shellv1alpha1.ModeStateful)
	case command.AA:
		return b.startChatJob(ctx, m, c.Arg, shellv1alpha1.ModeDirect)
	case command.K:
		return b.reply(ctx, m, b.kill(ctx, m.Chat.ID, m.From, "", m.ReplyTo, c.Arg, ".k"))
	case command.X, command.XF, command.SBB:
		return b.restartPool(ctx, m)
	case command.Help:
		return b.reply(ctx, m, b.helpText())
	case command.Settings:
		return b.settingsCommand(ctx, m, c.Arg)
	default:
		panic(fmt.Sprintf("bot: unknown command kind %d", c.Kind))
	}
}

func (b *Bot) reply(ctx context.Context, m Message, text string) error {
	_, err := b.tg.Reply(m).Text(ctx, text)
	return err
}

func (b *Bot) helpText() string {
	_, primary := b.nameSet()
	return fmt.Sprintf(`Shell commands (admins only):
.a CMD runs CMD in a shell of the pool
.af CMD runs CMD in the pool's stateful shell, which keeps cd and variables
.aa CMD runs CMD at once, even when every shell is busy
.k stops a command: as a reply, alone, .k N, .k all; .k ls lists them
.x, .xf, .sbb restart the shell pool
/settings shows how live output looks
Each also works as @%[1]s CMD; in a guest chat, @%[1]s .a CMD and @%[1]s .k.`, primary)
}

// HandleCallback answers a button press.
func (b *Bot) HandleCallback(ctx context.Context, cb Callback) error {
	b.chats.learn(cb.Chat)
	switch {
	case strings.HasPrefix(cb.Data, "shk:"):
		return b.tg.Callback(cb.QueryID).Answer(ctx, b.stopPress(ctx, cb))
	case strings.HasPrefix(cb.Data, approvalPrefix):
		return b.tg.Callback(cb.QueryID).Answer(ctx, b.approvalPress(ctx, cb))
	case strings.HasPrefix(cb.Data, settings.DataPrefix):
		return b.settingsPress(ctx, cb)
	default:
		return b.tg.Callback(cb.QueryID).Answer(ctx, texts.ButtonOutOfDate)
	}
}

// HandleDraftStop stops the job whose draft in user's private chat the
// user stopped. A draft's Stop gets no answer: a stop that fails is said
// in the chat.
func (b *Bot) HandleDraftStop(ctx context.Context, user, randomID int64) {
	if !b.isAdmin(user) {
		return
	}
	if j := b.registry.ByDraft(user, randomID); j != nil {
		if _, err := b.stopAs(ctx, j, user); err != nil {
			b.cfg.Log.Error(err, "Could not stop a job from its draft", "job", j.Name)
			chat, ok := b.chats.get(j.Chat)
			if !ok {
				chat = Chat{ID: j.Chat, Kind: PeerUser, PeerID: j.Chat}
			}
			if _, err := b.tg.To(chat).Reply(j.CommandMsg).Text(ctx, stopFailed(j, err)); err != nil {
				b.cfg.Log.Error(err, "Could not say that a stop failed", "job", j.Name)
			}
		}
	}
}
