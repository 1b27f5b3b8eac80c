"""bodega.cluster"""
