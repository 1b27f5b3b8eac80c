"""bodega.registry"""
