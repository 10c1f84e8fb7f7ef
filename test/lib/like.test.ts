import t from 'tap'
import { likeContains } from '../../src/lib/like.ts'

t.test('likeContains makes a literal substring pattern', async (t) => {
  t.equal(likeContains('ann'), '%ann%')
  t.equal(likeContains('50%_off\\'), '%50\\%\\_off\\\\%')
})
