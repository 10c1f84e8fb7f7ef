import t from 'tap'
import { extractVariables, templateVariables } from '../../src/notifications/variables.ts'

t.test('placeholders are extracted in order of first appearance, without duplicates', async (t) => {
  t.same(extractVariables('Hi {{first_name}}, {{bonus}} for {{first_name}}'), ['first_name', 'bonus'])
})

t.test('whitespace inside the braces and dotted names are accepted', async (t) => {
  t.same(extractVariables('{{ name }} {{player.country}} {{  a_b1 }}'), ['name', 'player.country', 'a_b1'])
})

t.test('things that are not placeholders are ignored', async (t) => {
  t.same(extractVariables('{name} {{}} {{ 1abc }} {{a b}} {{a-b}} {{.x}} {{x.}} plain'), [])
})

t.test('triple braces still yield the inner name', async (t) => {
  t.same(extractVariables('{{{html}}}'), ['html'])
})

t.test('subject comes before body; null and empty texts are skipped', async (t) => {
  t.same(extractVariables('{{s}} {{both}}', '{{b}} {{both}}'), ['s', 'both', 'b'])
  t.same(extractVariables(null, undefined, '', '{{x}}'), ['x'])
})

t.test('template variables are the union of placeholders and declared names', async (t) => {
  t.same(templateVariables({ subject: 'Hi {{name}}', body: 'Code {{code}}', declared: ['code', 'extra', 'extra'] }), ['name', 'code', 'extra'])
  t.same(templateVariables({ subject: null, body: 'no placeholders', declared: [] }), [])
})

t.test('names used with a fallback are listed too', async (t) => {
  t.same(extractVariables('Hi {{ name | there }}, {{code|none}} {{ x |}}'), ['name', 'code', 'x'])
  t.same(templateVariables({ subject: '{{ first | friend }}', body: '{{ bonus | a gift }}', declared: [] }), ['first', 'bonus'])
})
