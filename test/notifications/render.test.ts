import t from 'tap'
import { addOpenPixel, htmlToText, linksOf, render, rewriteLinks } from '../../src/notifications/render.ts'

t.test('placeholders with values, fallbacks and dotted names', async (t) => {
  const r = render({ channel: 'in_app', subject: 'Hi {{ name | there }}', body: '{{bonus.amount}} {{ currency }}', values: { bonus: { amount: 10 }, currency: 'EUR' } })
  t.same(r, { ok: true, subject: 'Hi there', body: '10 EUR' })
})

t.test('a missing value without fallback fails naming it', async (t) => {
  t.same(render({ channel: 'push', subject: null, body: 'Hello {{first}} {{second}}', values: {} }), { ok: false, error: 'missing variable: first' })
  t.same(render({ channel: 'push', subject: '{{s}}', body: 'x', values: {} }), { ok: false, error: 'missing variable: s' })
})

t.test('values are HTML-escaped in email and Telegram bodies, not in push or in-app, nor in subjects', async (t) => {
  const values = { name: '<b>Tom & "Jerry"</b>' }
  t.same(render({ channel: 'email', subject: '{{name}}', body: '<p>{{name}}</p>', values }), { ok: true, subject: values.name, body: '<p>&lt;b&gt;Tom &amp; &quot;Jerry&quot;&lt;/b&gt;</p>' })
  t.equal((render({ channel: 'telegram', subject: null, body: '{{name}}', values }) as { body: string }).body, '&lt;b&gt;Tom &amp; &quot;Jerry&quot;&lt;/b&gt;')
  t.equal((render({ channel: 'push', subject: null, body: '{{name}}', values }) as { body: string }).body, values.name)
  t.equal((render({ channel: 'in_app', subject: null, body: '{{ x | <i> }}', values: {} }) as { body: string }).body, '<i>')
  t.equal((render({ channel: 'email', subject: null, body: '{{ x | <i> }}', values: {} }) as { body: string }).body, '&lt;i&gt;')
})

t.test('links are collected once each and rewritten by index; the pixel goes before </body>', async (t) => {
  const html = '<html><body><a href="https://a.example/x?y=1&amp;z=2">A</a> <a class="c" href=\'http://b.example\'>B</a> <a href="https://a.example/x?y=1&amp;z=2">again</a> <a href="mailto:x@y">m</a></body></html>'
  t.same(linksOf(html), ['https://a.example/x?y=1&z=2', 'http://b.example'])
  const out = rewriteLinks(html, (i) => `https://t.example/c/${i}?a=1&b=2`)
  t.match(out, /href="https:\/\/t\.example\/c\/0\?a=1&amp;b=2">A/)
  t.match(out, /href='https:\/\/t\.example\/c\/1\?a=1&amp;b=2'>B/)
  t.match(out, /href="mailto:x@y"/)
  t.match(addOpenPixel(out, 'https://t.example/o.gif'), /<img src="https:\/\/t\.example\/o\.gif"[^>]*><\/body>/)
  t.match(addOpenPixel('<p>x</p>', 'u'), /<p>x<\/p><img/)
})

t.test('the text part: blocks become lines, links keep their address, entities decoded', async (t) => {
  const text = htmlToText('<style>p{}</style><h1>Hello &amp; welcome</h1><p>Line<br>two</p><ul><li>one</li></ul><a href="https://x.example">Go</a>')
  t.equal(text, 'Hello & welcome\nLine\ntwo\n- one\nGo (https://x.example)')
})
