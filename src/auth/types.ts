/** An authenticated operator API key. */
export interface Principal {
  keyId: string
  tenantId: string
  /** Set for a brand-pinned key: it sees and writes only this brand. */
  brandId: string | null
  /** Empty means full access. */
  scopes: string[]
  expiresAt: number | null
}

export interface Brand {
  id: string
  tenantId: string
  name: string
  slug: string
  isDefault: boolean
  active: boolean
}
