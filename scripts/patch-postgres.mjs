// Runs after `npm install` / `npm ci` (package.json "postinstall"): mends ten faults of the `postgres`
// driver 3.4.9 that end the whole process, wedge a connection, or run statements in the wrong transaction, when
// PostgreSQL drops a connection (a restart, a failover, pg_terminate_backend) or under load, until a release
// carries the upstream fixes:
// 1. `nextWrite` runs from a setImmediate after `closed()` set the socket to null and throws a TypeError no
//    caller can catch (porsager/postgres#1154, #1208; PRs #1176, #1209). Now it settles the connection's
//    queries with CONNECTION_CLOSED instead.
// 2. `terminate()` and `closed()` cancel the pending write but leave `nextWriteTimer` set, so the reconnected
//    connection never schedules a write again. Now they reset it and drop the dead connection's buffer.
// 3. The array-type query every new connection runs first is started from a sync handler that drops its
//    promise: a connection terminated at that moment is an unhandled rejection (#1192, #1223), which ends
//    the process. Now its failure is caught and the types are fetched again on the next ready connection.
// 4. `closed()` keeps the dead socket's in-flight query and pipelined queries when the socket ended with an
//    error, and when it reconnects for a waiting query the new connection takes the stale one as answered
//    by its first ReadyForQuery and then waits forever for a query it never sent. Now a closed socket's
//    queries all fail with CONNECTION_CLOSED (found by test/events/fault-pg-terminate.test.ts).
// 5. A `sql.reserve()` waiting for a connection is lost when a closing connection picks it up to reconnect
//    (`onclose` shifts it off the wait list and the new connection drops it): the caller waits forever.
//    Now it stays on the list until a connection is handed to it, and settles once (a connection handed to
//    one already failed goes back to the pool).
// 6. `release()` of a reserved connection that closed meanwhile put it in the open list while it was
//    reconnecting. Now only a connection still reserved goes back.
// 7. A reserved connection (`sql.reserve()`, `sql.begin()`) that closes leaves the queries queued behind a
//    full pipeline unsettled, and sends the ones made after the close to the same connection object, which
//    by then may be reconnected for another caller: statements of a transaction would run outside it. Now
//    the queued ones fail with the close, and later ones fail at once.
// 8. A socket closed cleanly (a FIN, no error) while a connection starts up, as a proxy in front of a down
//    server does, leaves the query that opened it waiting and reconnects at once, in a loop with no delay
//    and no bound (#1193; PR #1214): ~700 connections a second, and the query waits for as long as the
//    outage lasts. Now the query fails with CONNECTION_CLOSED and the connection backs off as after any
//    close (several hosts keep the driver's way: the next host is tried).
// 9. `sql.begin()` reserves its connection in an `onexecute` hook that `execute()` calls last in a chain of
//    conditions: when BEGIN was the query that filled a busy connection's pipeline (`max_pipeline`) or met
//    a full socket buffer, the hook was skipped though BEGIN had been sent (porsager/postgres#1189, #823;
//    PRs #1218, #1207). The transaction stayed open on a connection left in the pool, so other callers'
//    statements ran inside it, and `begin` failed with a TypeError, and its next statement's handler threw
//    one no caller can catch, ending the process (seen in the embedded webhooks bench). Now the hook runs
//    whenever BEGIN was sent, and no other query is pipelined behind it.
// 10. A socket `drain` event put a connection back in the pool whenever no query was in flight, a reserved
//    one (between a transaction's statements) too. Now a reserved connection is left to its holder.
// Each mend is applied once (idempotent); a driver whose code no longer looks like this is left alone.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', 'postgres')

const mends = [
  {
    name: 'nextWrite on a closed socket',
    done: '/* respin: nextWrite guard */',
    apply: (text) =>
      text.replace('function nextWrite(fn) {', `function nextWrite(fn) {
    /* respin: nextWrite guard */
    if (socket === null) {
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }`),
  },
  {
    name: 'stale write timer after a close',
    done: 'clearImmediate(nextWriteTimer), nextWriteTimer = null, chunk = null',
    apply: (text) =>
      text.split('    clearImmediate(nextWriteTimer)\n').length === 3
        ? text.replaceAll('    clearImmediate(nextWriteTimer)\n', '    clearImmediate(nextWriteTimer), nextWriteTimer = null, chunk = null\n')
        : text,
  },
  {
    name: 'queries of a closed socket',
    done: '/* respin: a closed socket\'s queries fail */',
    apply: (text) =>
      text.replace(`    socket.removeAllListeners()
    socket = null

    if (initial)
      return reconnect()
`, `    socket.removeAllListeners()
    socket = null

    /* respin: a closed socket's queries fail */
    const lost = Errors.connection('CONNECTION_CLOSED', options)
    query && (queryError(query, lost), query = null)
    while (sent.length)
      queryError(sent.shift(), lost)
    errorResponse = results = null

    if (initial)
      return reconnect()
`),
  },
  {
    name: 'dropped array-type fetch',
    done: '/* respin: array types retried */',
    apply: (text) =>
      text.replace('        return fetchArrayTypes()\n', '        return fetchArrayTypes().catch(() => { needsTypes = true }) /* respin: array types retried */\n'),
  },
  {
    // After "queries of a closed socket", whose text it extends.
    name: 'a startup closed cleanly',
    done: '/* respin: a startup closed cleanly fails its query */',
    apply: (text) =>
      text.replace(`    errorResponse = results = null

    if (initial)
      return reconnect()
`, `    errorResponse = results = null

    /* respin: a startup closed cleanly fails its query */
    if (initial && options.host.length > 1)
      return reconnect()
    initial && (queryError(initial, lost), initial = null)
`),
  },
  {
    name: 'BEGIN sent without its reservation',
    done: '/* respin: a BEGIN that was sent reserves its connection */',
    apply: (text) =>
      text.replace(`      build(q)
      return write(toBuffer(q))
        && !q.describeFirst
        && !q.cursorFn
        && sent.length < max_pipeline
        && (!q.options.onexecute || q.options.onexecute(connection))`, `      build(q)
      const written = write(toBuffer(q))
      /* respin: a BEGIN that was sent reserves its connection */
      if (q.options.onexecute) {
        socket && q.options.onexecute(connection)
        return false
      }
      return written
        && !q.describeFirst
        && !q.cursorFn
        && sent.length < max_pipeline`),
  },
  {
    name: 'drain of a reserved connection',
    done: '/* respin: a reserved connection stays with its holder */',
    apply: (text) =>
      text.replace(`  function drain() {
    !query && onopen(connection)
  }`, `  function drain() {
    /* respin: a reserved connection stays with its holder */
    !query && !connection.reserved && onopen(connection)
  }`),
  },
]

const poolMends = [
  {
    name: 'queries of a closed reserved connection',
    done: '/* respin: a closed reserved connection fails its queries */',
    apply: (text) =>
      text.replace(`    c.reserved.release = true

    const sql = Sql(handler)
    sql.release = () => {
      c.reserved = null`, `    c.reserved.release = true
    /* respin: a closed reserved connection fails its queries */
    const mine = c.reserved
    const drain = (e) => { while (queue.length) queue.shift().reject(e) }
    c.onclose = drain

    const sql = Sql(handler)
    sql.release = () => {
      c.onclose === drain && (c.onclose = null)
      c.reserved = null`).replace(`    function handler(q) {
      c.queue === full
        ? queue.push(q)
        : c.execute(q) || move(c, full)
    }
  }`, `    function handler(q) {
      c.reserved !== mine
        ? q.reject(Errors.connection('CONNECTION_CLOSED', options))
        : c.queue === full
          ? queue.push(q)
          : c.execute(q) || move(c, full)
    }
  }`).replace(`        new Promise((_, reject) => connection.onclose = reject)`, `        new Promise((_, reject) => connection.onclose = (e) => { while (queries.length) queries.shift().reject(e); reject(e) })`).replace(`      function handler(q) {
        q.catch(e => uncaughtError || (uncaughtError = e))
        c.queue === full
          ? queries.push(q)
          : c.execute(q) || move(c, full)
      }`, `      function handler(q) {
        q.catch(e => uncaughtError || (uncaughtError = e))
        c.reserved !== mine
          ? q.reject(Errors.connection('CONNECTION_CLOSED', options))
          : c.queue === full
            ? queries.push(q)
            : c.execute(q) || move(c, full)
      }`).replace(`    function onexecute(c) {
      connection = c
      move(c, reserved)
      c.reserved = () => queries.length
        ? c.execute(queries.shift())
        : move(c, reserved)
    }`, `    function onexecute(c) {
      connection = c
      move(c, reserved)
      c.reserved = () => queries.length
        ? c.execute(queries.shift())
        : move(c, reserved)
      mine = c.reserved
    }`).replace(`    let savepoints = 0
      , connection
      , prepare = null`, `    let savepoints = 0
      , connection
      , prepare = null
      , mine = null`),
  },
  {
    name: 'lost reserve',
    done: '/* respin: reserve settles once */',
    apply: (text) =>
      text.replace(`      : await new Promise((resolve, reject) => {
        const query = { reserve: resolve, reject }
        queries.push(query)`, `      : await new Promise((resolve, reject) => {
        /* respin: reserve settles once */
        let settled = false
        const query = {
          reserve: (c) => settled ? onopen(c) : (settled = true, resolve(c)),
          reject: (err) => settled || (settled = true, queries.remove(query), reject(err))
        }
        queries.push(query)`).replace(`    queries.length && connect(c, queries.shift())
  }`, `    if (queries.length) { /* respin: a waiting reserve stays queued */
      const query = queries.shift()
      query.reserve && queries.push(query)
      connect(c, query)
    }
  }`),
  },
  {
    name: 'release of a closed reserved connection',
    done: '/* respin: a reserved connection that closed is not reopened */',
    apply: (text) =>
      text.replace(`      c.reserved = null
      onopen(c)
    }`, `      c.reserved = null
      c.queue === reserved && onopen(c) /* respin: a reserved connection that closed is not reopened */
    }`),
  },
]

for (const dir of ['src', 'cjs/src', 'cf/src']) {
  for (const [name, list] of [['connection.js', mends], ['index.js', poolMends]]) {
    const file = join(root, dir, name)
    if (!existsSync(file)) continue
    let text = readFileSync(file, 'utf8')
    for (const mend of list) {
      if (text.includes(mend.done)) continue
      const mended = mend.apply(text)
      if (mended === text) console.warn(`respin: postgres ${dir}/${name}: "${mend.name}" not found (not the 3.4.9 code); left as it is`)
      text = mended
    }
    writeFileSync(file, text)
  }
}
