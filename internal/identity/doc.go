// Package identity says who a chat admin is to Kubernetes, and which pool
// a chat runs on, as the chart maps them (bot.identities and bot.chats,
// rendered into the bot's ConfigMap): the bot impersonates an admin's
// Identity for everything it does on their behalf.
//
// An admin the mapping does not list is user shelljob:telegram:<id>. Every
// identity is in the group shelljob:telegram, and carries the user extra
// shelljob.dev/telegram-user with the Telegram user id: the chart lets only
// the bot's ServiceAccount impersonate that extra, for the admins' ids
// alone, and the origin admission policy admits a job that claims a
// Telegram origin only from a request that carries it. Parse refuses
// identities in system: users or groups, which no chat admin may become.
package identity
