"""bodega.placement"""
